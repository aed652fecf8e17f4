package lvmdapi

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// notify wakes every Watch stream.
func (s *Server) notify() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Notify makes every Watch stream send the current capacity (for example after lvmd.yaml changed).
func (s *Server) Notify() { s.notify() }

// Capacity is the Watch message for the current state.
func (s *Server) Capacity(ctx context.Context) (*proto.WatchResponse, error) {
	cfg, err := s.config()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "read lvmd configuration: %v", err)
	}
	rep, err := s.runner.FullReport(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return watchResponse(cfg, rep)
}

// watchResponse builds one item per device class, in lvmd.yaml order.
func watchResponse(cfg *lvmd.Config, rep *lvm.Report) (*proto.WatchResponse, error) {
	out := &proto.WatchResponse{}
	for _, d := range cfg.DeviceClasses {
		st, err := stateOf(rep, d)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		item := &proto.WatchItem{DeviceClass: d.Name, SizeBytes: st.vg.Size, FreeBytes: st.reported()}
		if isThin(d) {
			item.FreeBytes = st.vg.Free
			data, err := lvm.ParsePercent(st.pool.DataPercent)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "thin pool %s data_percent: %v", st.pool.FullName, err)
			}
			meta, err := lvm.ParsePercent(st.pool.MetadataPercent)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "thin pool %s metadata_percent: %v", st.pool.FullName, err)
			}
			item.ThinPool = &proto.ThinPoolItem{DataPercent: data, MetadataPercent: meta,
				OverprovisionBytes: st.reported(), SizeBytes: st.pool.Size}
		}
		if d.Default {
			out.FreeBytes = st.reported()
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

// Watch implements VGService: the capacity now, after every change and every WatchInterval.
func (s *Server) Watch(_ *proto.Empty, stream grpc.ServerStreamingServer[proto.WatchResponse]) error {
	ctx := stream.Context()
	ch := make(chan struct{}, 1)
	s.wmu.Lock()
	s.watchers[ch] = struct{}{}
	s.wmu.Unlock()
	defer func() {
		s.wmu.Lock()
		delete(s.watchers, ch)
		s.wmu.Unlock()
	}()
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		msg, err := s.Capacity(ctx)
		if err != nil {
			return err
		}
		if err := stream.Send(msg); err != nil {
			return fmt.Errorf("send capacity: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		case <-ticker.C:
		}
	}
}

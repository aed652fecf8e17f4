package csicontroller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Backoff is how the controller polls for the node's answer: from Initial, times Factor, at most Cap
// between polls, until the call's deadline.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Cap     time.Duration
}

// DefaultBackoff polls after 100ms, then twice as long each time, at most every 10s (TopoLVM's cap).
func DefaultBackoff() Backoff {
	return Backoff{Initial: 100 * time.Millisecond, Factor: 2, Cap: 10 * time.Second}
}

// errNotDone tells waitFor to poll again.
var errNotDone = errors.New("not done")

// waitFor calls check until it returns something other than errNotDone, sleeping with backoff between
// calls, until ctx ends. It is the one wait loop of the controller service.
func (b Backoff) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	delay := b.Initial
	for {
		err := check(ctx)
		if !errors.Is(err, errNotDone) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return status.Errorf(codes.DeadlineExceeded, "timed out waiting for %s: %v", what, ctx.Err())
		case <-t.C:
		}
		delay = min(time.Duration(float64(delay)*b.Factor), b.Cap)
	}
}

// volumes finds and changes LogicalVolumes.
type volumes struct {
	client client.Client
	// reader reads from the API server directly, for objects the cache may not have seen yet.
	reader  client.Reader
	backoff Backoff
}

// byName gets a LogicalVolume by metadata.name.
func (v *volumes) byName(ctx context.Context, name string) (*topolvmv1.LogicalVolume, error) {
	lv := &topolvmv1.LogicalVolume{}
	err := v.client.Get(ctx, types.NamespacedName{Name: name}, lv)
	if apierrors.IsNotFound(err) && v.reader != nil {
		err = v.reader.Get(ctx, types.NamespacedName{Name: name}, lv)
	}
	if err != nil {
		return nil, err
	}
	return lv, nil
}

// byVolumeID finds the LogicalVolume whose status.volumeID is id; nil when there is none.
func (v *volumes) byVolumeID(ctx context.Context, id string) (*topolvmv1.LogicalVolume, error) {
	for _, r := range []client.Reader{v.client, v.reader} {
		if r == nil {
			continue
		}
		list := &topolvmv1.LogicalVolumeList{}
		if err := r.List(ctx, list); err != nil {
			return nil, status.Errorf(codes.Internal, "list LogicalVolumes: %v", err)
		}
		for i := range list.Items {
			if list.Items[i].Status.VolumeID == id {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}

// waitProvisioned waits for the node's answer to a new LogicalVolume. A non-OK code is the node's
// refusal: the object is deleted (so that a retry starts afresh) and the code returned.
func (v *volumes) waitProvisioned(ctx context.Context, name string) (*topolvmv1.LogicalVolume, error) {
	var out *topolvmv1.LogicalVolume
	err := v.backoff.waitFor(ctx, "LogicalVolume "+name+" to be provisioned by its node", func(ctx context.Context) error {
		lv, err := v.byName(ctx, name)
		if err != nil {
			return status.Errorf(codes.Internal, "get LogicalVolume %s: %v", name, err)
		}
		if lv.Status.Code != int32(codes.OK) {
			if err := v.client.Delete(ctx, lv); err != nil && !apierrors.IsNotFound(err) {
				return status.Errorf(codes.Internal, "delete failed LogicalVolume %s: %v", name, err)
			}
			return status.Error(codes.Code(lv.Status.Code), lv.Status.Message)
		}
		if lv.Status.VolumeID == "" {
			return errNotDone
		}
		out = lv
		return nil
	})
	return out, err
}

// deleteAndWait deletes a LogicalVolume and waits until the node has removed its LV and the object is gone.
func (v *volumes) deleteAndWait(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	if err := v.client.Delete(ctx, lv); err != nil && !apierrors.IsNotFound(err) {
		return status.Errorf(codes.Internal, "delete LogicalVolume %s: %v", lv.Name, err)
	}
	return v.backoff.waitFor(ctx, "LogicalVolume "+lv.Name+" to be removed by its node", func(ctx context.Context) error {
		cur, err := v.byName(ctx, lv.Name)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return status.Errorf(codes.Internal, "get LogicalVolume %s: %v", lv.Name, err)
		case cur.UID != lv.UID:
			return nil // gone, and a new one with the same name was created since
		}
		return errNotDone
	})
}

// waitResized waits until the node grew the LV to at least size bytes.
func (v *volumes) waitResized(ctx context.Context, name string, size int64) (*topolvmv1.LogicalVolume, error) {
	var out *topolvmv1.LogicalVolume
	err := v.backoff.waitFor(ctx, fmt.Sprintf("LogicalVolume %s to grow to %d bytes", name, size), func(ctx context.Context) error {
		lv, err := v.byName(ctx, name)
		if err != nil {
			return status.Errorf(codes.Internal, "get LogicalVolume %s: %v", name, err)
		}
		if lv.Status.Code != int32(codes.OK) {
			return status.Error(codes.Code(lv.Status.Code), lv.Status.Message)
		}
		if lv.Status.CurrentSize == nil || lv.Status.CurrentSize.Value() < size {
			return errNotDone
		}
		out = lv
		return nil
	})
	return out, err
}

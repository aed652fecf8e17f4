package lvmdapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

// blockingExec holds every lvcreate until release is closed and counts how many are in flight at once.
type blockingExec struct {
	next    lvm.Executor
	entered chan string
	release chan struct{}

	mu               sync.Mutex
	inFlight, maxRun int
}

func (b *blockingExec) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	if !slices.Contains(cmd.Argv, "lvcreate") {
		return b.next.Execute(ctx, cmd)
	}
	b.mu.Lock()
	b.inFlight++
	b.maxRun = max(b.maxRun, b.inFlight)
	b.mu.Unlock()
	b.entered <- cmd.String()
	<-b.release
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return b.next.Execute(ctx, cmd)
}

// TestServer_VolumeGroupsDoNotWaitForEachOther: a slow lvcreate on one volume group does not hold up a
// change on another: both lvcreates are in flight at the same time.
func TestServer_VolumeGroupsDoNotWaitForEachOther(t *testing.T) {
	sim := lvmsim.New()
	sim.AddVG("vg1", 20*gib)
	sim.AddVG("vg2", 20*gib)
	ex := &blockingExec{next: sim, entered: make(chan string, 2), release: make(chan struct{})}
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{
		{Name: "a", VolumeGroup: "vg1", Default: true},
		{Name: "b", VolumeGroup: "vg2"},
	}}
	c, stop, err := InProcess(NewServer(lvm.Runner{Exec: ex}, StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	errs := make(chan error, 2)
	for _, dc := range []string{"a", "b"} {
		go func() {
			_, err := c.CreateLV(context.Background(), &proto.CreateLVRequest{Name: "v-" + dc, DeviceClass: dc, SizeBytes: gib})
			errs <- err
		}()
	}
	// The guard only ends a failing run (one lvcreate waits for the other, which never returns);
	// nothing is ordered by it.
	guard := time.NewTimer(time.Minute)
	defer guard.Stop()
	for range 2 {
		select {
		case <-ex.entered:
		case <-guard.C:
			close(ex.release)
			t.Fatal("only one lvcreate was in flight: a change on vg2 waited for the slow one on vg1")
		}
	}
	close(ex.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if ex.maxRun != 2 {
		t.Errorf("at most %d lvcreate in flight, want 2", ex.maxRun)
	}
}

// hangingExec answers every lvcreate with the runner's timeout error, as OSExecutor does when lvcreate
// hangs on a dead device.
type hangingExec struct{ next lvm.Executor }

func (h hangingExec) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	if slices.Contains(cmd.Argv, "lvcreate") {
		return lvm.Result{}, &lvm.TimeoutError{Command: cmd.String(), After: cmd.Timeout}
	}
	return h.next.Execute(ctx, cmd)
}

// TestServer_HungCommand: a hung lvm2 command is DeadlineExceeded naming the command, its VG and how
// long it hung.
func TestServer_HungCommand(t *testing.T) {
	sim := lvmsim.New()
	sim.AddVG("vg1", 20*gib)
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "a", VolumeGroup: "vg1", Default: true}}}
	c, stop, err := InProcess(NewServer(lvm.Runner{Exec: hangingExec{next: sim}, Timeout: 90 * time.Second}, StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	_, err = c.CreateLV(context.Background(), &proto.CreateLVRequest{Name: "v", SizeBytes: gib})
	if code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "`lvm lvcreate -n v -L 1073741824b -W y -y --addtag lvms-volume vg1` hung: no exit after 1m30s") {
		t.Errorf("CreateLV: %v, want DeadlineExceeded naming lvcreate on vg1 and 1m30s", err)
	}
}

package transfer_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
)

// lvsExecutor answers `lvm lvs` with out and records the command.
type lvsExecutor struct {
	out  string
	cmds []lvm.Command
}

func (e *lvsExecutor) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) {
	e.cmds = append(e.cmds, cmd)
	return lvm.Result{Stdout: []byte(e.out)}, nil
}

func TestLVMPools_ThinTargetsHaveTheirClassesPoolAndThresholdsAndUsageComesFromLvsWithATimeout(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := topolvmv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	lv := func(name, node, dc string) *topolvmv1.LogicalVolume {
		return &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topolvmv1.LogicalVolumeSpec{NodeName: node, DeviceClass: dc}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		lv("thin-default", "node-b", ""), lv("thick", "node-b", "ssd"), lv("elsewhere", "node-c", "")).Build()
	data := 80.0
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{
		{Name: "thin", VolumeGroup: "vg0", Default: true, Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "pool0", DataUsageThreshold: &data}},
		{Name: "ssd", VolumeGroup: "vg1"},
	}}
	exec := &lvsExecutor{out: `{"report": [{"lv": [{"lv_name":"pool0", "data_percent":"12.50", "metadata_percent":"3.25"}]}]}`}
	p := transfer.LVMPools{Reader: c, NodeName: "node-b", LVM: lvm.Runner{Exec: exec},
		ThinPoolOf: transfer.LVMDThinPools(func() (*lvmd.Config, error) { return cfg, nil })}
	ctx := t.Context()

	pool, err := p.ThinPool(ctx, "thin-default")
	if err != nil || pool == nil || *pool != (transfer.ThinPool{VolumeGroup: "vg0", Name: "pool0", DataThreshold: 80, MetadataThreshold: lvmd.DefaultMetadataUsageThreshold}) {
		t.Fatalf("the default class's volume: pool %+v, %v; want vg0/pool0 with thresholds 80%% and the default metadata one", pool, err)
	}
	if pool, err := p.ThinPool(ctx, "thick"); err != nil || pool != nil {
		t.Errorf("a thick class's volume: pool %+v, %v; want none", pool, err)
	}
	if _, err := p.ThinPool(ctx, "elsewhere"); err == nil || !strings.Contains(err.Error(), `is on node "node-c"`) {
		t.Errorf("another node's volume: %v", err)
	}

	d, m, err := p.Usage(ctx, *pool)
	if err != nil || d != 12.5 || m != 3.25 {
		t.Fatalf("usage %v%% data, %v%% metadata, %v; want 12.5 and 3.25", d, m, err)
	}
	if len(exec.cmds) != 1 {
		t.Fatalf("%d commands, want one lvs", len(exec.cmds))
	}
	cmd := exec.cmds[0]
	if got := cmd.String(); !strings.HasPrefix(got, "lvm lvs ") || !strings.HasSuffix(got, " vg0/pool0") {
		t.Errorf("command %q, want lvm lvs of vg0/pool0", got)
	}
	if cmd.Timeout <= 0 || cmd.Timeout > lvm.DefaultTimeout/10 {
		t.Errorf("lvs runs with timeout %s, want a short one that kills it (the copy waits meanwhile)", cmd.Timeout)
	}

	exec.out = `{"report": [{"lv": []}]}`
	if _, _, err := p.Usage(ctx, *pool); err == nil || !strings.Contains(err.Error(), "lvs did not report thin pool pool0") {
		t.Errorf("a pool lvs does not list: %v", err)
	}
}

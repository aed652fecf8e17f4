package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/record"
)

var events = []handover.Progress{
	{Step: "mark", Done: 1, Total: 1, Message: "marked LVMCluster lvms/my-lvmcluster"},
	{Step: "hand-over", Node: "worker-a", Done: 0, Total: 2, Message: "handing node worker-a over to the LVMNodeSets"},
	{Step: "hand-over", Node: "worker-a", Done: 1, Total: 2, Message: "node worker-a is managed by the LVMNodeSets"},
	{Step: "adopt-classes", Total: 0, Message: "a step without units"},
}

func printed(tty bool) string {
	var b bytes.Buffer
	p := progressPrinter(&b, tty)
	for _, e := range events {
		p(e)
	}
	return b.String()
}

// Off a terminal (pipes, CI logs) the lines stay as scripts read them: no bar, no escape code.
func TestProgressPrinter_Plain(t *testing.T) {
	want := "[mark 1/1] marked LVMCluster lvms/my-lvmcluster\n" +
		"[hand-over 0/2] handing node worker-a over to the LVMNodeSets\n" +
		"[hand-over 1/2] node worker-a is managed by the LVMNodeSets\n" +
		"[adopt-classes 0/0] a step without units\n"
	if got := printed(false); got != want {
		t.Errorf("plain progress:\n%s\nwant:\n%s", got, want)
	}
}

// On a terminal each line starts with a 20-cell bar of the step's units.
func TestProgressPrinter_Terminal(t *testing.T) {
	want := strings.Repeat("█", 20) + " mark           1/1 marked LVMCluster lvms/my-lvmcluster\n" +
		strings.Repeat("░", 20) + " hand-over      0/2 handing node worker-a over to the LVMNodeSets\n" +
		strings.Repeat("█", 10) + strings.Repeat("░", 10) + " hand-over      1/2 node worker-a is managed by the LVMNodeSets\n" +
		"[adopt-classes 0/0] a step without units\n"
	if got := ansi.Strip(printed(true)); got != want {
		t.Errorf("terminal progress:\n%s\nwant:\n%s", got, want)
	}
}

func TestStepLists(t *testing.T) {
	p := &plan.Plan{Namespace: "lvms", Name: "my-lvmcluster", NodeSets: []lvmv2.LVMNodeSet{
		{ObjectMeta: metav1.ObjectMeta{Name: "my-lvmcluster"}}, {ObjectMeta: metav1.ObjectMeta{Name: "my-lvmcluster-2"}}}}
	var b bytes.Buffer
	writeApplySteps(&b, "lvms", "my-lvmcluster", p, nil, 3)
	want := `Migrating LVMCluster lvms/my-lvmcluster to LVMNodeSets in 5 steps; run apply again to resume from any of them:
    mark           mark the LVMCluster to keep its storage when removed, and record what v1 shows
    create-sets    create 2 LVMNodeSet(s): my-lvmcluster, my-lvmcluster-2
    hand-over      hand over 3 node(s) one at a time, each once its volume groups are adopted
    adopt-classes  wait for the LVMNodeSets to adopt the StorageClasses and VolumeSnapshotClasses in place
    remove-cluster remove the LVMCluster; its volume groups, volumes and classes stay

`
	if b.String() != want {
		t.Errorf("apply's steps:\n%s\nwant:\n%s", b.String(), want)
	}

	// Resumed: the record says what is done; without a node count the line says which nodes.
	rec := &record.Record{Step: record.StepSetsCreated, Sets: []string{"my-lvmcluster"}, Nodes: []string{"a", "b", "c"}, HandedOver: []string{"a"}}
	b.Reset()
	writeApplySteps(&b, "lvms", "my-lvmcluster", p, rec, 3)
	for _, w := range []string{"  ✓ mark ", "  ✓ create-sets ", "    hand-over      hand over 3 node(s) one at a time, each once its volume groups are adopted (1 done)", "    adopt-classes "} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("resumed apply's steps lack %q:\n%s", w, b.String())
		}
	}
	b.Reset()
	writeApplySteps(&b, "lvms", "my-lvmcluster", p, nil, -1)
	if !strings.Contains(b.String(), "hand over the nodes the LVMCluster manages one at a time") {
		t.Errorf("apply's steps without a node count:\n%s", b.String())
	}

	b.Reset()
	writeRollbackSteps(&b, "lvms", "my-lvmcluster", rec)
	want = `Rolling back the migration of LVMCluster lvms/my-lvmcluster in 3 steps; run rollback again to resume:
    hand-back      hand the handed-over nodes (1 in the record) back to the LVMCluster, the last first
    delete-sets    delete the LVMNodeSets (my-lvmcluster), keeping their storage
    done           wait for the LVMCluster to own its classes again, then unmark it

`
	if b.String() != want {
		t.Errorf("rollback's steps:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeRollbackSteps(&b, "lvms", "my-lvmcluster", nil)
	if b.Len() != 0 {
		t.Errorf("rollback without a record listed steps:\n%s", b.String())
	}
}

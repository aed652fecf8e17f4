package groupsnapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// group is b then a: the engine works in origin order whatever the request's order.
func group(id string) Request {
	return Request{ID: id, Tags: []string{"app=db"}, Members: []Member{
		{VG: "thin", Origin: "b", Snapshot: "sb"}, {VG: "thin", Origin: "a", Snapshot: "sa"}}}
}

var success = []string{
	"report",
	"snapshot sa of thin/a", "snapshot sb of thin/b",
	"thin IDs of thin",
	"suspend thin-a", "suspend thin-b",
	"message thin-pool-tpool 0 delete 6", "message thin-pool-tpool 0 create_snap 6 1",
	"message thin-pool-tpool 0 delete 7", "message thin-pool-tpool 0 create_snap 7 2",
	"resume thin-a", "resume thin-b",
	"read-only thin/sa", "activate thin/sa", "read-only thin/sb", "activate thin/sb",
}

func TestTake_SuspendsSnapshotsResumesInOrder(t *testing.T) {
	n := newNode(t)
	res, err := n.engine(t, 0).Take(context.Background(), group("g1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.commands(); !slices.Equal(got, success) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(success, "\n"))
	}
	if len(n.violations) > 0 {
		t.Errorf("kernel rules broken: %v", n.violations)
	}
	// The snapshots hold their origins as they were while suspended (epoch 6, the "suspend thin-b"
	// command), not as lvm2 copied them before (epochs 2 and 3), nor as they are now.
	if a, b := n.content("sa"), n.content("sb"); a != "a@5" || b != "b@6" {
		t.Errorf("snapshots hold %q and %q, want a@5 and b@6 (the origins at their suspend)", a, b)
	}
	// 100 ms per command from the first suspend to the last resume: 8 commands.
	if res.Suspended != 800*time.Millisecond {
		t.Errorf("suspend time %s, want 800ms", res.Suspended)
	}
	if want := []Member{{"thin", "a", "sa"}, {"thin", "b", "sb"}}; !slices.Equal(res.Snapshots, want) {
		t.Errorf("snapshots %v, want %v", res.Snapshots, want)
	}
	for _, m := range res.Snapshots {
		lv, _ := n.sim.LV("thin", m.Snapshot)
		if lv.Origin != m.Origin || !lv.ReadOnly || !lv.Active || !slices.Equal(lv.Tags, []string{"app=db", lvm.VolumeTag, "lvms-group=g1"}) {
			t.Errorf("snapshot %s: %+v, want an active read-only snapshot of %s with the request's, the volume's and the group's tags", m.Snapshot, lv, m.Origin)
		}
	}
	if s := n.stillSuspended(); len(s) > 0 {
		t.Errorf("still suspended: %v", s)
	}
	if err := n.inStep(); err != nil {
		t.Error(err)
	}
	assertNoState(t, n)
}

func TestTake_RetryOfATakenGroupSuspendsNothing(t *testing.T) {
	n := newNode(t)
	e := n.engine(t, 0)
	if _, err := e.Take(context.Background(), group("g1")); err != nil {
		t.Fatal(err)
	}
	before := len(n.commands())
	res, err := e.Take(context.Background(), group("g1"))
	if err != nil || res.Suspended != 0 || len(res.Snapshots) != 2 {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if got := n.commands()[before:]; !slices.Equal(got, []string{"report"}) {
		t.Errorf("a retry ran %v, want only a report", got)
	}
	// Another group asking for the same snapshot names is refused: they are group g1's.
	_, err = e.Take(context.Background(), group("g2"))
	assertRefused(t, err, ReasonExists)
}

// TestTake_FailureAtEachStep fails each command of a group in turn: every origin is resumed, the snapshots
// taken are removed, the origins are untouched, and the state file is gone.
func TestTake_FailureAtEachStep(t *testing.T) {
	for _, step := range success[1:] {
		t.Run(step, func(t *testing.T) {
			n := newNode(t)
			n.fail[step] = "injected failure"
			n.times[step] = 1 // a retried resume then works
			res, err := n.engine(t, 0).Take(context.Background(), group("g1"))
			if strings.HasPrefix(step, "resume ") {
				if err != nil {
					t.Fatalf("a resume failing once is retried: %v", err)
				}
				assertClean(t, n, "sa", "sb")
				return
			}
			if err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("got %v, want the injected failure", err)
			}
			if res.Snapshots != nil {
				t.Errorf("a failed group returned snapshots %v", res.Snapshots)
			}
			assertClean(t, n)
			cmds := n.commands()
			if strings.HasPrefix(step, "message") || strings.HasPrefix(step, "read-only") || strings.HasPrefix(step, "activate") {
				if !slices.Contains(cmds, "resume thin-a") || !slices.Contains(cmds, "resume thin-b") {
					t.Errorf("not every origin was resumed: %v", cmds)
				}
			}
		})
	}
}

func TestTake_PanicAndCancelResumeEverything(t *testing.T) {
	t.Run("panic", func(t *testing.T) {
		n := newNode(t)
		n.panicOn = "message thin-pool-tpool 0 create_snap 7 2"
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("the injected panic did not reach the caller")
				}
			}()
			_, _ = n.engine(t, 0).Take(context.Background(), group("g1"))
		}()
		assertClean(t, n)
	})
	t.Run("cancel", func(t *testing.T) {
		n := newNode(t)
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel, n.cancelOn = cancel, "message thin-pool-tpool 0 delete 6"
		_, err := n.engine(t, 0).Take(ctx, group("g1"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		assertClean(t, n)
		if got := n.commands(); !slices.Contains(got, "resume thin-a") || !slices.Contains(got, "resume thin-b") {
			t.Errorf("commands %v: want both resumed after the cancel", got)
		}
	})
}

func TestTake_DeadlineAbandonsTheRestAndRemovesWhatWasTaken(t *testing.T) {
	n := newNode(t)
	n.stepSuspended = 2 * time.Second
	req := group("g1")
	req.Members = append(req.Members, Member{VG: "thin", Origin: "c", Snapshot: "sc"})
	res, err := n.engine(t, 5*time.Second).Take(context.Background(), req)
	var de *DeadlineError
	// The clock reads 0.1 s at suspending a, 2.1 s at b, 4.1 s at c, 6.1 s once sa's delete ran (started
	// at 4.1 s, within the limit): the create_snap that would follow is past 5 s and never runs.
	if !errors.As(err, &de) || de.Taken != 0 || de.Of != 3 || de.MaxSuspend != 5*time.Second {
		t.Fatalf("got %v, want a deadline error with 0 of 3 snapshots taken", err)
	}
	if !strings.Contains(err.Error(), "5s") || !strings.Contains(err.Error(), "0 of 3") {
		t.Errorf("the message does not say the limit and how far it got: %v", err)
	}
	for _, c := range n.commands() {
		if strings.Contains(c, "create_snap") {
			t.Errorf("%q ran after the deadline", c)
		}
	}
	assertClean(t, n)
	if res.Suspended < 5*time.Second {
		t.Errorf("suspend time %s, want at least the deadline", res.Suspended)
	}
}

// TestTake_ResumeThatKeepsFailing: the error says which volume may still be suspended and the command
// that resumes it; the state file stays, and Recover (as at the agent's restart) finishes the job.
func TestTake_ResumeThatKeepsFailing(t *testing.T) {
	n := newNode(t)
	n.fail["resume thin-b"] = "device busy"
	n.times["resume thin-b"] = resumeAttempts
	_, err := n.engine(t, 0).Take(context.Background(), group("g1"))
	if err == nil || !strings.Contains(err.Error(), "dmsetup resume thin-b") || !strings.Contains(err.Error(), "thin/b may still be suspended") {
		t.Fatalf("got %v, want an error naming thin/b and how to resume it", err)
	}
	if _, err := os.Stat(filepath.Join(n.stateDir, "group-g1.json")); err != nil {
		t.Fatalf("the state file must stay for Recover: %v", err)
	}
	if s := n.stillSuspended(); !slices.Equal(s, []string{"thin-b"}) {
		t.Fatalf("suspended %v, want thin-b (the fake's resume failed)", s)
	}
	if err := n.engine(t, 0).Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertClean(t, n)
}

// TestRecover_AfterAKill kills the agent (the command never returns, nothing after it runs) at each step
// of a group and restarts it: Recover resumes every origin, removes the group's snapshots and nothing
// else, leaves the pool in step with lvm2 (a snapshot whose device was deleted but not replaced gets one
// back before lvm2 removes it), and deletes the state file.
func TestRecover_AfterAKill(t *testing.T) {
	for _, step := range success[1:] {
		t.Run(step, func(t *testing.T) {
			n := newNode(t)
			n.blockOn = step
			go func() { _, _ = n.engine(t, 0).Take(context.Background(), group("g1")) }()
			<-n.blocked
			n.mu.Lock()
			n.blockOn = ""
			n.mu.Unlock()
			// The restarted agent: a new process, so the killed one's flocks are gone.
			n.mu.Lock()
			n.lockDir = t.TempDir()
			n.mu.Unlock()
			e, err := New(Options{Runner: lvm.Runner{Exec: n, LockDir: n.lockDir}, StateDir: n.stateDir, Clock: n.clock})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Recover(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertClean(t, n)
			if len(n.violations) > 0 {
				t.Errorf("kernel rules broken: %v", n.violations)
			}
		})
	}
}

func TestRecover_MalformedStateFileIsReportedAndKept(t *testing.T) {
	n := newNode(t)
	for name, body := range map[string]string{
		"group-bad.json":   "{not json",
		"group-other.json": `{"id":"someone-else","members":[{"vg":"thin","origin":"a","snapshot":"sa"}]}`,
		"group-opt.json":   `{"id":"opt","members":[{"vg":"thin","origin":"--force","snapshot":"sa"}]}`,
	} {
		must(os.WriteFile(filepath.Join(n.stateDir, name), []byte(body), 0o600))
	}
	n.suspended["thin-c"] = true
	must(n.engine(t, 0).writeIntent(intent{ID: "good", Members: []Member{{"thin", "c", "sc"}}}))
	err := n.engine(t, 0).Recover(context.Background())
	for _, f := range []string{"group-bad.json", "group-other.json", "group-opt.json"} {
		if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "dmsetup resume") {
			t.Errorf("error %v does not name %s and what to do", err, f)
		}
		if _, serr := os.Stat(filepath.Join(n.stateDir, f)); serr != nil {
			t.Errorf("%s was removed: %v", f, serr)
		}
	}
	if s := n.stillSuspended(); len(s) > 0 {
		t.Errorf("the good state file was not recovered: %v suspended", s)
	}
	for _, c := range n.commands() {
		if strings.Contains(c, "force") {
			t.Errorf("a name from a malformed state file reached a command: %q", c)
		}
	}
}

func TestTake_RefusedBeforeAnythingIsSuspended(t *testing.T) {
	m := func(vg, origin, snap string) Member { return Member{VG: vg, Origin: origin, Snapshot: snap} }
	many := make([]Member, MaxMembers+1)
	for i := range many {
		many[i] = m("thin", "o"+strings.Repeat("x", i), "s"+strings.Repeat("x", i))
	}
	for _, tc := range []struct {
		name    string
		id      string
		members []Member
		setup   func(*node)
		want    Reason
	}{
		{"thick volume", "g", []Member{m("thick", "vol", "s")}, nil, ReasonThickVolume},
		{"two volume groups", "g", []Member{m("thin", "a", "sa"), m("thick", "vol", "s")}, nil, ReasonMixedVolumeGroups},
		{"two thin pools", "g", []Member{m("thin", "a", "sa"), m("thin", "elsewhere", "se")}, nil, ReasonMixedPools},
		{"origin missing", "g", []Member{m("thin", "a", "sa"), m("thin", "nope", "sn")}, nil, ReasonNotFound},
		{"volume group missing", "g", []Member{m("nope", "a", "sa")}, nil, ReasonNotFound},
		{"thin pool as origin", "g", []Member{m("thin", "pool", "sp")}, nil, ReasonThickVolume},
		{"snapshot name taken by an origin", "g", []Member{m("thin", "a", "b")}, nil, ReasonExists},
		{"snapshot name is another member's origin", "g", []Member{m("thin", "a", "b"), m("thin", "b", "sb")}, nil, ReasonInvalid},
		{"origin named twice", "g", []Member{m("thin", "a", "s1"), m("thin", "a", "s2")}, nil, ReasonInvalid},
		{"suspended already", "g", []Member{m("thin", "a", "sa")}, func(n *node) { n.suspended["thin-a"] = true }, ReasonBusy},
		{"option as a name", "g", []Member{m("thin", "--yes", "sa")}, nil, ReasonInvalid},
		{"path as a name", "g", []Member{m("thin", "a", "../../dev/sda")}, nil, ReasonInvalid},
		{"empty name", "g", []Member{m("thin", "a", "")}, nil, ReasonInvalid},
		{"no members", "g", nil, nil, ReasonInvalid},
		{"too many members", "g", many, nil, ReasonInvalid},
		{"LVMS's own tag", "g", []Member{m("thin", "a", "sa")}, func(n *node) { n.tags = []string{"lvms-group=other"} }, ReasonInvalid},
		{"ID with a slash", "../g", []Member{m("thin", "a", "sa")}, nil, ReasonInvalid},
		{"empty ID", "", []Member{m("thin", "a", "sa")}, nil, ReasonInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			if tc.setup != nil {
				tc.setup(n)
			}
			before := n.stillSuspended()
			lvs := n.lvs("thin")
			_, err := n.engine(t, 0).Take(context.Background(), Request{ID: tc.id, Members: tc.members, Tags: n.tags})
			assertRefused(t, err, tc.want)
			for _, c := range n.commands() {
				if c != "report" {
					t.Errorf("a refused group ran %q", c)
				}
			}
			if got := n.stillSuspended(); !slices.Equal(got, before) {
				t.Errorf("suspended %v, was %v", got, before)
			}
			if got := n.lvs("thin"); !slices.Equal(got, lvs) {
				t.Errorf("LVs %v, were %v", got, lvs)
			}
			assertNoState(t, n)
		})
	}
}

func TestDMName(t *testing.T) {
	for _, tc := range []struct{ vg, lv, want string }{
		{"thin", "a", "thin-a"},
		{"my-vg", "d-1", "my--vg-d--1"},
		{"vg", "0a1b-c", "vg-0a1b--c"},
	} {
		if got := DMName(tc.vg, tc.lv); got != tc.want {
			t.Errorf("DMName(%q, %q) = %q, want %q", tc.vg, tc.lv, got, tc.want)
		}
	}
}

func TestNew_NeedsAStateDirectory(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("an engine without a state directory could not recover after a restart")
	}
}

func TestTake_DashedNamesReachDeviceMapperEscaped(t *testing.T) {
	n := newNode(t)
	if _, err := n.engine(t, 0).Take(context.Background(), Request{ID: "g", Members: []Member{{VG: "thin", Origin: "d-1", Snapshot: "s-1"}}}); err != nil {
		t.Fatal(err)
	}
	if got := n.commands(); !slices.Contains(got, "suspend thin-d--1") || !slices.Contains(got, "resume thin-d--1") {
		t.Errorf("commands %v: want the device-mapper name thin-d--1", got)
	}
}

func assertRefused(t *testing.T, err error, want Reason) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != want {
		t.Fatalf("got %v, want a refusal %s", err, want)
	}
}

// assertClean: nothing suspended, the origins there and unchanged, no snapshot but the kept ones, no
// state file.
func assertClean(t *testing.T, n *node, keep ...string) {
	t.Helper()
	if s := n.stillSuspended(); len(s) > 0 {
		t.Errorf("still suspended: %v", s)
	}
	want := append([]string{"a", "b", "c", "d-1", "elsewhere", "other", "pool"}, keep...)
	slices.Sort(want)
	if got := n.lvs("thin"); !slices.Equal(got, want) {
		t.Errorf("LVs %v, want %v", got, want)
	}
	for _, o := range []string{"a", "b"} {
		if lv, _ := n.sim.LV("thin", o); lv.Size != 1<<30 || lv.ReadOnly || !lv.Active {
			t.Errorf("origin %s changed: %+v", o, lv)
		}
	}
	if err := n.inStep(); err != nil {
		t.Error(err)
	}
	assertNoState(t, n)
}

func assertNoState(t *testing.T, n *node) {
	t.Helper()
	entries, err := os.ReadDir(n.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "group-") && e.Name() != "group-bad.json" && e.Name() != "group-other.json" && e.Name() != "group-opt.json" {
			t.Errorf("state file %s left", e.Name())
		}
	}
}

// TestRecover_LeavesAnLVThatIsNotTheGroups: after a crash, an LV now carries a name the state file gives a
// snapshot, but the group did not make it (no group tag, no origin): Recover neither removes it nor touches
// its device (the fake's application keeps writing to it, so its content is not compared).
func TestRecover_LeavesAnLVThatIsNotTheGroups(t *testing.T) {
	n := newNode(t)
	must(n.sim.Runner().CreateThinLV(context.Background(), "thin", "pool", "sa", 1<<30))
	n.assignIDs()
	must(n.engine(t, 0).writeIntent(intent{ID: "g1", Members: []Member{{"thin", "a", "sa"}}, Pool: "pool", SnapshotIDs: []uint64{n.ids["thin/sa"]}}))
	if err := n.engine(t, 0).Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range n.commands() {
		if strings.HasPrefix(c, "remove ") || strings.HasPrefix(c, "message ") {
			t.Errorf("Recover ran %q on an LV the group did not make", c)
		}
	}
	if _, ok := n.sim.LV("thin", "sa"); !ok {
		t.Errorf("thin/sa was removed")
	}
	assertNoState(t, n)
}

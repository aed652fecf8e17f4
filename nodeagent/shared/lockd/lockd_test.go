package lockd

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

func TestLVMConfigTurnsOnLvmlockdPerCommand(t *testing.T) {
	got := LVMConfig(42)
	want := []string{"--config", "global{use_lvmlockd=1} local{host_id=42}"}
	if !slices.Equal(got, want) {
		t.Fatalf("LVMConfig(42) = %q, want %q", got, want)
	}
}

func TestNewRefusesHostIDsSanlockRejects(t *testing.T) {
	for _, id := range []int{0, -1, 2001} {
		if _, err := New(Options{HostID: id}); err == nil || !strings.Contains(err.Error(), "1..2000") {
			t.Errorf("New(HostID %d) error = %v, want one naming the range 1..2000", id, err)
		}
	}
	s, err := New(Options{HostID: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetHostID(5); err != nil {
		t.Errorf("SetHostID before Run: %v, want nil", err)
	}
	if st := s.Status(); st.HostID != 5 || st.Mode != ModeNotRunning || st.Fencing != FencingOff {
		t.Errorf("Status before Run = %+v, want host ID 5, NotRunning, %q", st, FencingOff)
	}
}

// fakeHost answers status commands: a program in up exits 0, any other 1. It records what ran.
type fakeHost struct {
	up  map[string]bool
	mu  sync.Mutex
	ran [][]string
}

func (f *fakeHost) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) {
	f.mu.Lock()
	f.ran = append(f.ran, cmd.Argv)
	f.mu.Unlock()
	prog := cmd.Argv[len(lvm.NSEnterPrefix())] // behind the prefix
	if f.up[prog] {
		return lvm.Result{Stdout: []byte("use_watchdog=0\n")}, nil
	}
	return lvm.Result{ExitCode: 1, Stderr: []byte("cannot connect\n")}, nil
}

func TestDetectFindsDaemonsBehindThePrefixAndTheWatchdog(t *testing.T) {
	dir := t.TempDir()
	device := filepath.Join(dir, "watchdog")
	cases := []struct {
		name   string
		up     []string
		device bool
		want   Detection
	}{
		{"nothing", nil, false, Detection{}},
		{"host daemons, no watchdog", []string{"sanlock", "lvmlockctl"}, false, Detection{Sanlock: true, Lvmlockd: true}},
		{"wdmd runs", []string{"wdmd"}, false, Detection{Wdmd: true}},
		{"watchdog device only", nil, true, Detection{WatchdogDevice: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(device)
			if c.device {
				if err := os.WriteFile(device, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f := &fakeHost{up: map[string]bool{}}
			for _, p := range c.up {
				f.up[p] = true
			}
			got := Detect(t.Context(), lvm.Runner{Prefix: lvm.NSEnterPrefix(), Exec: f}, device)
			if got != c.want {
				t.Errorf("Detect = %+v, want %+v", got, c.want)
			}
			if got.Watchdog() != (c.want.Wdmd || c.want.WatchdogDevice) {
				t.Errorf("Watchdog() = %v", got.Watchdog())
			}
			for _, argv := range f.ran {
				if !slices.Equal(argv[:len(lvm.NSEnterPrefix())], lvm.NSEnterPrefix()) {
					t.Errorf("%q ran without the runner's prefix", argv)
				}
			}
		})
	}
}

func TestSanlockRunsWithoutWatchdogOnlyWhenTheHostHasNone(t *testing.T) {
	if args := newSanlock(false, 0).args; !slices.Equal(args[len(args)-2:], []string{"-w", "0"}) {
		t.Errorf("sanlock without a watchdog: %q, want -w 0 (watchdog off)", args)
	}
	if args := newSanlock(true, 0).args; !slices.Equal(args[len(args)-2:], []string{"-w", "1"}) {
		t.Errorf("sanlock with a watchdog: %q, want -w 1", args)
	}
	if a, b := strings.Join(newSanlock(false, 2).args, " "), strings.Join(newLvmlockd(9, 2).args, " "); !strings.HasSuffix(a, "-w 0 -o 2") || !strings.HasSuffix(b, "-o 2") {
		t.Errorf("with a 2 s I/O timeout: sanlock %s, lvmlockd %s; want -o 2 for both", a, b)
	}
	if args := newLvmlockd(9, 0).args; !strings.Contains(strings.Join(args, " "), "--host-id 9") {
		t.Errorf("lvmlockd: %q, want --host-id 9", args)
	}
	if !usesWatchdog([]byte("daemon x\n    use_watchdog=1\n")) || usesWatchdog([]byte("    use_watchdog=0\n")) {
		t.Error("use_watchdog= in sanlock client status -D is misread")
	}
}

func TestRestartBackoffGrowsAndStartsOverAfterAStableRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
	b := newRestartBackoff(wait.Backoff{Duration: time.Second, Factor: 2, Steps: 100, Cap: 8 * time.Second}, time.Minute)
	run := func(d time.Duration) time.Duration {
		started := clk.Now()
		clk.Step(d)
		return b.next(clk.Since(started))
	}
	var got []time.Duration
	for range 5 {
		got = append(got, run(time.Second)) // keeps exiting right after start
	}
	got = append(got, run(time.Hour)) // ran fine for an hour, then exited
	got = append(got, run(time.Second))
	want := []time.Duration{1, 2, 4, 8, 8, 1, 2}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Errorf("restart delays = %v, want %v", got, want)
	}
}

// stop must give a daemon its grace period after SIGTERM, then kill its whole process group.
func TestStopKillsTheGroupOfADaemonThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	cases := map[string]string{
		// The child sleep inherits the ignored SIGTERM: only the group's SIGKILL ends both.
		"the daemon ignores SIGTERM": `trap "" TERM; sleep 1000 & echo started; wait`,
		// As behind nsenter --pid: the leader dies of SIGTERM at once, the daemon (its child) does not.
		"the leader exits, its child ignores SIGTERM": `(trap "" TERM; exec sleep 1000) & echo started; wait`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			s, err := New(Options{HostID: 1, Clock: clk, StopGrace: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			p, err := startProcess(lvm.Runner{}, "sh", []string{"-c", script})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.signal(syscall.SIGKILL) })
			waitFor(t, "the test daemon to start", func() bool { return p.out.lastLine() == "started" })
			stopped := make(chan struct{})
			go func() { s.stop(newSanlock(false, 0), p); close(stopped) }()
			waitFor(t, "stop to wait for the grace period", clk.HasWaiters)
			if !p.groupAlive() {
				t.Fatal("the daemon exited on SIGTERM, which it ignores")
			}
			clk.Step(time.Minute)
			for done := false; !done; {
				select {
				case <-stopped:
					done = true
				case <-time.After(10 * time.Millisecond):
					clk.Step(answerPoll) // stop polls the group until it is gone
				}
			}
			if p.groupAlive() {
				t.Fatal("stop returned, a process of the daemon's group still runs")
			}
		})
	}
}

// A daemon that exits on SIGTERM is stopped without waiting for the grace period.
func TestStopReturnsWhenTheDaemonExitsOnSIGTERM(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s, err := New(Options{HostID: 1, Clock: clk, StopGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProcess(lvm.Runner{}, "sleep", []string{"1000"})
	if err != nil {
		t.Fatal(err)
	}
	s.stop(newLvmlockd(1, 0), p) // the fake clock never moves: only SIGTERM can end this
	if p.groupAlive() {
		t.Fatal("stop returned, the daemon still runs")
	}
}

// busyHost answers lvmlockctl --info with lvmlockctl's "busy" exit status a number of times, then 0.
type busyHost struct{ busy int }

func (b *busyHost) Execute(context.Context, lvm.Command) (lvm.Result, error) {
	if b.busy > 0 {
		b.busy--
		return lvm.Result{ExitCode: lvmlockctlBusy}, nil
	}
	return lvm.Result{}, nil
}

// Another lvmlockctl on the host (an admin's, another agent's) must not make lvmlockd look stopped.
func TestProbeAsksABusyLvmlockctlAgain(t *testing.T) {
	if _, err := probe(t.Context(), lvm.Runner{Exec: &busyHost{busy: 2}}, lvmlockdStatus); err != nil {
		t.Errorf("lvmlockctl busy twice, then answering: %v, want lvmlockd reported running", err)
	}
	_, err := probe(t.Context(), lvm.Runner{Exec: &busyHost{busy: busyRetries}}, lvmlockdStatus)
	if err == nil || !strings.Contains(err.Error(), "exit status 158") {
		t.Errorf("lvmlockctl always busy: %v, want an error with its exit status", err)
	}
}

// TestParseLockspaces reads sanlock's lockspaces and their ADD/REM flags from `sanlock client status` (the
// format of sanlock's client_cmd.c: "s NAME:HOST_ID:PATH:OFFSET[ FLAG]"); -D detail lines and resources
// are skipped.
func TestParseLockspaces(t *testing.T) {
	out := "daemon 0a1b2c3d-node-a\np -1 helper\np -1 listener\np 212 lvmlockd\np -1 status\n" +
		"s lvm_vg1:1404:/dev/mapper/vg1-lvmlock:0\n    list=spaces\n    space_id=1\n" +
		"s lvm_vg2:1404:/dev/mapper/vg2-lvmlock:0 ADD\n" +
		"s lvm_vg3:1404:/dev/mapper/vg\\:3-lvmlock:0 REM\n" +
		"r lvm_vg1:GLLK:/dev/mapper/vg1-lvmlock:69206016:5 p 212\n" +
		"s :broken\ns\n"
	got := parseLockspaces([]byte(out))
	want := map[string]string{"lvm_vg1": LockspaceJoined, "lvm_vg2": LockspaceAdding, "lvm_vg3": LockspaceRemoving}
	if !maps.Equal(got, want) {
		t.Errorf("parseLockspaces = %v, want %v", got, want)
	}
	if got := parseLockspaces(nil); len(got) != 0 {
		t.Errorf("no output: %v", got)
	}
}

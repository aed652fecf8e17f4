package groupsnapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

// node is a fake node: lvmsim's lvm2, plus what the kernel holds (device-mapper suspend state, the thin
// pool's devices by ID with their content), a log of what was done in words, faults, and a fake clock that
// each command advances. An origin's content changes at every command while it is not suspended, as if an
// application wrote to it all the time.
type node struct {
	lockDir, stateDir string
	sim               *lvmsim.LVM
	clock             *clocktesting.FakeClock

	mu        sync.Mutex
	log       []string
	epoch     int
	suspended map[string]bool
	ids       map[string]uint64 // vg/lv -> thin device ID
	kernel    map[uint64]string // thin device ID -> content
	// fail makes every command whose log line is a key fail with the value as stderr (exit 5), times[key]
	// times (0: always).
	fail  map[string]string
	times map[string]int
	// panicOn and cancelOn panic or cancel (cancel) at the command whose log line they name; blockOn
	// blocks it forever (a kill), closing blocked first.
	panicOn, cancelOn, blockOn string
	cancel                     context.CancelFunc
	blocked                    chan struct{}
	// step is how far the clock advances at each command; stepSuspended at each command while an origin
	// is suspended, when set.
	step, stepSuspended time.Duration
	// tags are the request's tags in tests that need some.
	tags []string
	// violations lists what the kernel would have done wrong: a snapshot of an origin not suspended, a
	// delete of a device that is not a snapshot of the group.
	violations []string
}

func newNode(t *testing.T) *node {
	n := &node{lockDir: t.TempDir(), stateDir: t.TempDir(), sim: lvmsim.New(),
		clock:     clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		suspended: map[string]bool{}, ids: map[string]uint64{}, kernel: map[uint64]string{},
		fail: map[string]string{}, times: map[string]int{}, step: 100 * time.Millisecond, blocked: make(chan struct{})}
	n.sim.AddVG("thin", 10<<30)
	n.sim.AddThinPool("thin", "pool", 4<<30)
	n.sim.AddThinPool("thin", "other", 1<<30)
	n.sim.AddVG("thick", 10<<30)
	r := n.sim.Runner()
	ctx := context.Background()
	for _, lv := range []string{"a", "b", "c", "d-1"} {
		must(r.CreateThinLV(ctx, "thin", "pool", lv, 1<<30))
	}
	must(r.CreateThinLV(ctx, "thin", "other", "elsewhere", 1<<30))
	must(r.CreateLV(ctx, "thick", "vol", 1<<30))
	n.assignIDs()
	return n
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (n *node) runner() lvm.Runner {
	return lvm.Runner{Exec: n, DevicesFile: "lvms.devices", LockDir: n.lockDir}
}

// engine returns an engine on the node with the node's clock and state directory.
func (n *node) engine(t *testing.T, maxSuspend time.Duration) *Engine {
	t.Helper()
	e, err := New(Options{Runner: n.runner(), StateDir: n.stateDir, Clock: n.clock, MaxSuspend: maxSuspend})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// assignIDs gives new thin LVs the next thin device ID, in name order, with a device in the pool: a copy of
// origin's device for a snapshot (lvm2's create_snap).
func (n *node) assignIDs() {
	next := uint64(0)
	for _, id := range n.ids {
		next = max(next, id)
	}
	for _, lv := range n.sim.LVs("thin") {
		key := "thin/" + lv.Name
		if _, ok := n.ids[key]; ok || lv.ThinPool {
			continue
		}
		next++
		n.ids[key] = next
		n.kernel[next] = lv.Name + "@0"
		if lv.Origin != "" {
			n.kernel[next] = n.kernel[n.ids["thin/"+lv.Origin]]
		}
	}
}

// line renders a command as the log says it.
func line(argv []string) string {
	if argv[0] == "dmsetup" {
		return strings.Join(argv[1:], " ")
	}
	var args []string
	for i := 1; i < len(argv); i++ {
		if argv[i] == "--devicesfile" {
			i++
			continue
		}
		args = append(args, argv[i])
	}
	last := args[len(args)-1]
	switch {
	case args[0] == "lvcreate" && slices.Contains(args, "-s"):
		i := slices.Index(args, "-n")
		return "snapshot " + args[i+1] + " of " + args[i+2]
	case args[0] == "lvchange" && slices.Contains(args, "-p"):
		return "read-only " + last
	case args[0] == "lvchange" && slices.Contains(args, "-a"):
		return "activate " + last
	case args[0] == "lvremove":
		return "remove " + last
	case args[0] == "fullreport":
		return "report"
	case args[0] == "lvs":
		return "thin IDs of " + last
	}
	return strings.Join(args, " ")
}

func (n *node) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	l := line(cmd.Argv)
	n.mu.Lock()
	n.log = append(n.log, l)
	n.clock.Step(n.step)
	if len(n.suspended) > 0 && n.stepSuspended > 0 {
		n.clock.Step(n.stepSuspended - n.step)
	}
	n.epoch++
	for key, id := range n.ids {
		vg, name, _ := strings.Cut(key, "/")
		if lv, ok := n.sim.LV(vg, name); ok && lv.Origin == "" && lv.Active && !n.suspended[DMName(vg, name)] {
			n.kernel[id] = fmt.Sprintf("%s@%d", name, n.epoch)
		}
	}
	switch l {
	case n.panicOn:
		n.mu.Unlock()
		panic("injected panic at " + l)
	case n.blockOn:
		n.mu.Unlock()
		close(n.blocked)
		select {} // killed here: nothing after this runs
	case n.cancelOn:
		n.cancel()
	}
	if msg, ok := n.fail[l]; ok {
		if k := n.times[l]; k > 0 {
			if k == 1 {
				delete(n.fail, l)
			}
			n.times[l] = k - 1
		}
		n.mu.Unlock()
		return lvm.Result{ExitCode: 5, Stderr: []byte(msg)}, nil
	}
	if err := ctx.Err(); err != nil {
		n.mu.Unlock()
		return lvm.Result{}, fmt.Errorf("run %s: %w", l, err)
	}
	defer n.mu.Unlock()
	switch {
	case cmd.Argv[0] == "dmsetup" && cmd.Argv[1] == "message":
		return n.message(cmd.Argv[2], cmd.Argv[4]), nil
	case cmd.Argv[0] == "dmsetup":
		return n.dmsetup(cmd.Argv[1], cmd.Argv[2]), nil
	case strings.HasPrefix(l, "thin IDs of "):
		return n.thinIDs(), nil
	case strings.HasPrefix(l, "remove "), strings.HasPrefix(l, "activate "):
		key := strings.Fields(l)[1]
		if id, ok := n.ids[key]; ok {
			if _, there := n.kernel[id]; !there {
				return lvm.Result{ExitCode: 5, Stderr: []byte("device-mapper: message ioctl failed: No data available")}, nil
			}
			if strings.HasPrefix(l, "remove ") {
				delete(n.kernel, id)
				delete(n.ids, key)
			}
		}
	}
	res, err := n.sim.Execute(ctx, cmd)
	if strings.HasPrefix(l, "snapshot ") && res.ExitCode == 0 {
		n.assignIDs()
	}
	if l == "report" && err == nil {
		res.Stdout = n.markSuspended(res.Stdout)
	}
	return res, err
}

func (n *node) dmsetup(op, name string) lvm.Result {
	exists := false
	for _, vg := range []string{"thin", "thick"} {
		for _, lv := range n.sim.LVs(vg) {
			exists = exists || (DMName(vg, lv.Name) == name && lv.Active)
		}
	}
	if !exists {
		return lvm.Result{ExitCode: 1, Stderr: []byte("Device does not exist.\nCommand failed.")}
	}
	switch op {
	case "suspend":
		n.suspended[name] = true
	case "resume":
		delete(n.suspended, name)
	}
	return lvm.Result{}
}

// message is the thin pool's message ioctl, with the kernel's rules: delete refuses an active device,
// create_snap of an active origin needs it suspended (the fake records a violation), an ID in use is
// "File exists".
func (n *node) message(pool, msg string) lvm.Result {
	if pool != "thin-pool-tpool" {
		return lvm.Result{ExitCode: 1, Stderr: []byte("Device does not exist.")}
	}
	f := strings.Fields(msg)
	id, _ := strconv.ParseUint(f[1], 10, 64)
	fail := func(s string) lvm.Result {
		return lvm.Result{ExitCode: 1, Stderr: []byte("device-mapper: message ioctl on " + pool + " failed: " + s + "\nCommand failed.")}
	}
	if !n.lvm2Locked() {
		n.violations = append(n.violations, msg+" sent without lvm2's lock of the volume group")
	}
	key := n.lvOf(id)
	switch f[0] {
	case "delete":
		if _, ok := n.kernel[id]; !ok {
			return fail("No data available")
		}
		vg, name, _ := strings.Cut(key, "/")
		if lv, ok := n.sim.LV(vg, name); ok && lv.Active {
			return fail("Device or resource busy")
		}
		if lv, _ := n.sim.LV(vg, name); lv.Origin == "" || !slices.ContainsFunc(lv.Tags, func(t string) bool { return strings.HasPrefix(t, "lvms-group=") }) {
			n.violations = append(n.violations, "deleted "+key+", which is no group snapshot")
		}
		delete(n.kernel, id)
	case "create_snap":
		if _, ok := n.kernel[id]; ok {
			return fail("File exists")
		}
		origin, _ := strconv.ParseUint(f[2], 10, 64)
		vg, name, _ := strings.Cut(n.lvOf(origin), "/")
		if !n.suspended[DMName(vg, name)] {
			n.violations = append(n.violations, "snapshot of "+name+" while it was not suspended")
		}
		n.kernel[id] = n.kernel[origin]
	case "create_thin":
		if _, ok := n.kernel[id]; ok {
			return fail("File exists")
		}
		n.kernel[id] = ""
	}
	return lvm.Result{}
}

// lvm2Locked reports whether someone holds lvm2's lock of volume group thin (an lvm2 command would wait).
func (n *node) lvm2Locked() bool {
	f, err := os.OpenFile(filepath.Join(n.lockDir, "V_thin"), os.O_CREATE|os.O_RDWR, 0o600)
	must(err)
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	must(unix.Flock(int(f.Fd()), unix.LOCK_UN))
	return false
}

func (n *node) lvOf(id uint64) string {
	for k, v := range n.ids {
		if v == id {
			return k
		}
	}
	return ""
}

func (n *node) thinIDs() lvm.Result {
	var rows []map[string]string
	for _, lv := range n.sim.LVs("thin") {
		a := []byte("Vwi-a-tz--")
		if !lv.Active {
			a[4] = '-'
		}
		row := map[string]string{"lv_name": lv.Name, "pool_lv": lv.Pool, "lv_attr": string(a), "thin_id": ""}
		if id, ok := n.ids["thin/"+lv.Name]; ok {
			row["thin_id"] = strconv.FormatUint(id, 10)
		}
		rows = append(rows, row)
	}
	b, err := json.Marshal(map[string]any{"report": []map[string]any{{"lv": rows}}})
	must(err)
	return lvm.Result{Stdout: b}
}

// markSuspended shows suspended LVs in lv_attr as lvm2 does ('s' in the fifth character).
func (n *node) markSuspended(out []byte) []byte {
	var rep map[string][]map[string][]map[string]string
	must(json.Unmarshal(out, &rep))
	for _, sub := range rep["report"] {
		for _, row := range sub["lv"] {
			if n.suspended[DMName(row["vg_name"], row["lv_name"])] {
				a := []byte(row["lv_attr"])
				a[4] = 's'
				row["lv_attr"] = string(a)
			}
		}
	}
	b, err := json.Marshal(rep)
	must(err)
	return b
}

func (n *node) commands() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.log)
}

func (n *node) stillSuspended() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for k := range n.suspended {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// content is what thin/lv holds in the kernel.
func (n *node) content(lv string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kernel[n.ids["thin/"+lv]]
}

// inStep reports whether the pool's devices are exactly the thin LVs lvm2 lists (no orphan, none missing).
func (n *node) inStep() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key, id := range n.ids {
		if _, ok := n.kernel[id]; !ok {
			return fmt.Errorf("lvm2 lists %s (thin ID %d) but the pool has no such device", key, id)
		}
	}
	for id := range n.kernel {
		if n.lvOf(id) == "" {
			return fmt.Errorf("the pool has device %d that lvm2 does not list", id)
		}
	}
	return nil
}

// lvs lists the names of the LVs of vg.
func (n *node) lvs(vg string) []string {
	var out []string
	for _, lv := range n.sim.LVs(vg) {
		out = append(out, lv.Name)
	}
	return out
}

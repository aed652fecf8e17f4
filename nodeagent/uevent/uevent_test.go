package uevent_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/uevent"
)

// format renders an event as the kernel sends it.
func format(e uevent.Event) []byte {
	var b strings.Builder
	b.WriteString(e.Action + "@" + e.DevPath + "\x00")
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		b.WriteString(k + "=" + e.Env[k] + "\x00")
	}
	return []byte(b.String())
}

// A message as Linux 6.x sends it when a loop device gets a back-file.
const loopChange = "change@/devices/virtual/block/loop3\x00ACTION=change\x00DEVPATH=/devices/virtual/block/loop3\x00" +
	"SUBSYSTEM=block\x00DISKSEQ=12\x00MAJOR=7\x00MINOR=3\x00DEVNAME=loop3\x00DEVTYPE=disk\x00SEQNUM=4321\x00"

func TestParse(t *testing.T) {
	e, err := uevent.Parse([]byte(loopChange))
	if err != nil {
		t.Fatal(err)
	}
	if e.Action != "change" || e.DevPath != "/devices/virtual/block/loop3" || !e.Block() || e.Env["DEVNAME"] != "loop3" || len(e.Env) != 9 {
		t.Errorf("parsed %+v", e)
	}
	net, err := uevent.Parse([]byte("add@/devices/virtual/net/veth1\x00ACTION=add\x00SUBSYSTEM=net\x00"))
	if err != nil || net.Block() {
		t.Errorf("a network device's event: %+v, %v; want parsed and not a block device", net, err)
	}
	for _, bad := range []string{"", "\x00", "change", "change@", "@/devices/x", "change@devices", "change@/d\x00NOEQUALS\x00",
		"change@/d\x00=v\x00", "add@/d\x00ACTION=remove\x00"} {
		if e, err := uevent.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", bad, e)
		}
	}
}

// FuzzParse: whatever arrives, Parse does not panic; what it accepts has an action and a /sys path and
// renders back to a message that parses to the same event.
func FuzzParse(f *testing.F) {
	f.Add([]byte(loopChange))
	f.Add([]byte("remove@/devices/virtual/block/dm-3\x00SUBSYSTEM=block\x00"))
	f.Add([]byte("libudev\x00\xfe\xed\xca\xfe"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		e, err := uevent.Parse(msg)
		if err != nil {
			return
		}
		if e.Action == "" || !strings.HasPrefix(e.DevPath, "/") || strings.ContainsRune(e.Action, '@') {
			t.Fatalf("Parse(%q) accepted %+v", msg, e)
		}
		again, err := uevent.Parse(format(e))
		if err != nil || again.Action != e.Action || again.DevPath != e.DevPath || !maps.Equal(again.Env, e.Env) {
			t.Fatalf("Parse(%q) = %+v, but its rendering parses to %+v, %v", msg, e, again, err)
		}
	})
}

// TestListener_SeesLoopDevice: attaching and detaching a real loop device reaches the listener as block
// device events naming it.
func TestListener_SeesLoopDevice(t *testing.T) {
	loopdev.RequireRoot(t)
	l, err := uevent.Open()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan uevent.Event, 256)
	done := make(chan error, 1)
	go func() {
		done <- l.Run(ctx, func(e uevent.Event, err error) {
			if err == nil {
				select {
				case events <- e:
				default:
				}
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	})
	dev := loopdev.Attach(t, loopdev.Dir(t), 8<<20, false)
	name := filepath.Base(dev)
	// Bounded so that a kernel that sends nothing fails the test instead of hanging it.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Env["DEVNAME"] == name && e.Block() {
				return
			}
		case <-deadline:
			t.Fatalf("no block uevent for %s within 30 s", dev)
		}
	}
}

package vm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type tw struct{ t *testing.T }

func (w tw) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestProto(t *testing.T) {
	dir, _ := CacheDir()
	start := time.Now()
	img, err := Prepare(context.Background(), dir, tw{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepare %s %+v", time.Since(start), img)
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "run.sh"), []byte(os.Getenv("PROTO_SCRIPT")), 0o755)
	disk := filepath.Join(work, "d0.img")
	f, _ := os.Create(disk)
	f.Truncate(2 << 30)
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := StartMachine(ctx, MachineConfig{Name: "proto", Image: img, WorkDir: work, Command: "/lvms-vm/run.sh", Console: tw{t},
		Disks: []MachineDisk{{Path: disk, Serial: "lvms-d0"}}})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := m.Wait()
	t.Logf("exit %+v err %v", ex, err)
}

package blockcopy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileProgress keeps a receiver's Progress in a JSON file, replaced atomically (write, sync, rename,
// sync the directory), so a crash leaves either the old or the new high-water mark.
type FileProgress struct {
	Path string
}

var _ ProgressStore = FileProgress{}

// Load returns the recorded progress; a missing file is no progress (start at chunk 0).
func (f FileProgress) Load() (Progress, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Progress{}, nil
	}
	if err != nil {
		return Progress{}, err
	}
	var p Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return Progress{}, fmt.Errorf("%s is not a copy progress record (%v): remove it to copy from the start", f.Path, err)
	}
	return p, nil
}

// Save records p.
func (f FileProgress) Save(p Progress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

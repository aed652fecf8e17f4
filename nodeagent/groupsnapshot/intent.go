package groupsnapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// intent is what the state file of a group in progress holds: enough to resume its origins and remove its
// snapshots after the agent was killed.
type intent struct {
	ID      string   `json:"id"`
	Members []Member `json:"members"`
	// Pool and SnapshotIDs (the thin device ID of each member's snapshot, in Members order) are recorded
	// once the snapshots exist, before the first suspend.
	Pool        string   `json:"pool,omitempty"`
	SnapshotIDs []uint64 `json:"snapshotIDs,omitempty"`
}

const intentPrefix, intentSuffix = "group-", ".json"

func (e *Engine) intentPath(id string) string {
	return filepath.Join(e.stateDir, intentPrefix+id+intentSuffix)
}

// writeIntent records a group about to be suspended, durably: written to a temporary file, synced,
// renamed over the final name, and the directory synced.
func (e *Engine) writeIntent(in intent) error {
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		return fmt.Errorf("record group %s before suspending: %w", in.ID, err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("record group %s before suspending: %w", in.ID, err)
	}
	path := e.intentPath(in.ID)
	tmp, err := os.CreateTemp(e.stateDir, ".tmp-"+intentPrefix)
	if err != nil {
		return fmt.Errorf("record group %s before suspending: %w", in.ID, err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("record group %s before suspending (%s): %w", in.ID, path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("record group %s before suspending (%s): %w", in.ID, path, err)
	}
	return syncDir(e.stateDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// removeIntent forgets a finished group.
func (e *Engine) removeIntent(id string) error {
	if err := os.Remove(e.intentPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the state file of group %s: %w", id, err)
	}
	return syncDir(e.stateDir)
}

// readIntent reads a state file; a file that is not one (malformed JSON, names that are not LV names, an
// ID other than its name's) is an error naming the file and what to do.
func readIntent(path string) (intent, error) {
	var in intent
	b, err := os.ReadFile(path)
	if err != nil {
		return in, fmt.Errorf("read group snapshot state %s: %w", path, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("group snapshot state %s is not valid (%s): check `dmsetup info -c` for suspended volumes, resume them with `dmsetup resume NAME`, then delete the file", path, what)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, bad(err.Error())
	}
	want := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), intentPrefix), intentSuffix)
	if in.ID != want {
		return in, bad(fmt.Sprintf("it names group %q", in.ID))
	}
	if _, err := (Request{ID: in.ID, Members: in.Members}).check(); err != nil {
		return in, bad(err.Error())
	}
	if in.SnapshotIDs != nil && (len(in.SnapshotIDs) != len(in.Members) || !validName(in.Pool)) {
		return in, bad("its pool or snapshot IDs do not match its members")
	}
	return in, nil
}

// intents lists the state files in the state directory, sorted.
func (e *Engine) intents() ([]string, error) {
	entries, err := os.ReadDir(e.stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read group snapshot state directory: %w", err)
	}
	var out []string
	for _, de := range entries {
		n := de.Name()
		if de.Type().IsRegular() && strings.HasPrefix(n, intentPrefix) && strings.HasSuffix(n, intentSuffix) {
			out = append(out, filepath.Join(e.stateDir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}

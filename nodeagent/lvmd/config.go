package lvmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// DefaultPath is where lvmd.yaml lives on a node.
const DefaultPath = "/etc/topolvm/lvmd.yaml"

// DeviceType is a device class's type.
type DeviceType string

// Device class types.
const (
	TypeDefault DeviceType = ""
	TypeThick   DeviceType = "thick"
	TypeThin    DeviceType = "thin"
)

// Config is lvmd.yaml.
type Config struct {
	// SocketName of lvmd's gRPC socket.
	SocketName string `json:"socket-name,omitempty"`
	// LVMCommandPrefix replaces the command prefix lvmd runs lvm with.
	LVMCommandPrefix []string `json:"lvm-command-prefix,omitempty"`
	// DeviceClasses lvmd serves.
	DeviceClasses []DeviceClass `json:"device-classes"`
	// LVCreateOptionClasses a StorageClass can select with topolvm.io/lvcreate-option-class.
	LVCreateOptionClasses []LVCreateOptionClass `json:"lvcreate-option-classes,omitempty"`

	// Unknown are the keys of the parsed file that nothing reads, each with its line: TopoLVM accepts
	// them, so they are warnings (in the node's status and log), not errors. Never written.
	Unknown []string `json:"-"`
}

// DeviceClass is one device class of lvmd.yaml.
type DeviceClass struct {
	Name            string          `json:"name"`
	VolumeGroup     string          `json:"volume-group"`
	Default         bool            `json:"default,omitempty"`
	SpareGB         *uint64         `json:"spare-gb,omitempty"`
	Stripe          *uint           `json:"stripe,omitempty"`
	StripeSize      string          `json:"stripe-size,omitempty"`
	LVCreateOptions []string        `json:"lvcreate-options,omitempty"`
	Type            DeviceType      `json:"type,omitempty"`
	ThinPool        *ThinPoolConfig `json:"thin-pool,omitempty"`
}

// ThinPoolConfig is a thin device class's pool.
type ThinPoolConfig struct {
	Name               string  `json:"name"`
	OverprovisionRatio float64 `json:"overprovision-ratio"`
	// DataUsageThreshold and MetadataUsageThreshold (percent, 0 < t <= 100) are LVMS's: how full the pool's
	// data and metadata may get before no new volume is placed on it. TopoLVM's files lack them, which
	// means the defaults.
	DataUsageThreshold     *float64 `json:"data-usage-threshold,omitempty"`
	MetadataUsageThreshold *float64 `json:"metadata-usage-threshold,omitempty"`
}

// Default usage thresholds of a thin pool, in percent. Metadata stops earlier than data: a pool whose
// metadata fills turns read-only, which takes every volume of the pool with it.
const (
	DefaultDataUsageThreshold     = 90.0
	DefaultMetadataUsageThreshold = 75.0
)

// Thresholds are the pool's data and metadata usage thresholds in percent, defaults filled in.
func (t *ThinPoolConfig) Thresholds() (data, metadata float64) {
	data, metadata = DefaultDataUsageThreshold, DefaultMetadataUsageThreshold
	if t == nil {
		return data, metadata
	}
	if t.DataUsageThreshold != nil {
		data = *t.DataUsageThreshold
	}
	if t.MetadataUsageThreshold != nil {
		metadata = *t.MetadataUsageThreshold
	}
	return data, metadata
}

// LVCreateOptionClass is a named set of lvcreate options.
type LVCreateOptionClass struct {
	Name    string   `json:"name"`
	Options []string `json:"options"`
}

// Parse decodes lvmd.yaml as TopoLVM's lvmd does: a file that is not YAML, or a value of the wrong type, is
// an error that names it; a key nothing reads is listed in Unknown with its line, as TopoLVM ignores it.
func Parse(data []byte) (*Config, error) {
	var cfg Config
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		if where := misfit(data); where != "" {
			return nil, errors.New(where)
		}
		return nil, fmt.Errorf("%s", cleanYAMLError(err))
	}
	cfg.Unknown = unknownKeys(data)
	return &cfg, nil
}

// cleanYAMLError turns the YAML-to-JSON decoder's wording into one sentence about the file.
func cleanYAMLError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error unmarshaling JSON: ")
	msg = strings.TrimPrefix(msg, "while decoding JSON: ")
	msg = strings.TrimPrefix(msg, "json: ")
	msg = strings.ReplaceAll(msg, "Go struct field ", "")
	msg = strings.ReplaceAll(msg, "Config.", "")
	return msg
}

// Load reads and parses lvmd.yaml. It does not validate; call Validate.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid lvmd.yaml: %w", path, err)
	}
	return cfg, nil
}

// Marshal renders the configuration as YAML.
func Marshal(cfg *Config) ([]byte, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render lvmd.yaml: %w", err)
	}
	return append([]byte("# Written by the LVMS node agent; edits are replaced on its next pass.\n"), data...), nil
}

// Write replaces the file atomically: readers see the old or the new file, never a partial one. It does
// nothing when the file already has this content, and reports whether it changed the file.
func Write(path string, cfg *Config) (bool, error) {
	data, err := Marshal(cfg)
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	return true, WriteFileAtomic(path, data)
}

// WriteFileAtomic replaces a file with data durably: readers see the old or the new file, never a partial
// one, and after it returns a crash keeps the new one.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable
		d.Close()
	}
	return nil
}

// Remove deletes the file; a missing file is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

var (
	nameRE       = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	stripeSizeRE = regexp.MustCompile(`(?i)^([0-9]*)(k|m|g|t|p|e|b|s)?$`)
)

// Validate checks the configuration as TopoLVM does and returns every problem, each a sentence.
func (c *Config) Validate() error {
	var errs []error
	if len(c.DeviceClasses) == 0 {
		errs = append(errs, errors.New("device-classes is empty: lvmd needs at least one device class"))
	}
	names, defaults, targets := map[string]bool{}, 0, map[string]string{}
	for i, dc := range c.DeviceClasses {
		where := fmt.Sprintf("device-classes[%d]", i)
		if dc.Name != "" {
			where = fmt.Sprintf("device class %q", dc.Name)
		}
		switch {
		case dc.Name == "":
			errs = append(errs, fmt.Errorf("%s has no name", where))
		case len(dc.Name) > 63 || !nameRE.MatchString(dc.Name):
			errs = append(errs, fmt.Errorf("%s: the name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", where))
		case names[dc.Name]:
			errs = append(errs, fmt.Errorf("%s is defined twice", where))
		}
		names[dc.Name] = true
		if dc.VolumeGroup == "" {
			errs = append(errs, fmt.Errorf("%s has no volume-group", where))
		}
		if dc.Default {
			defaults++
		}
		if dc.StripeSize != "" && !stripeSizeRE.MatchString(dc.StripeSize) {
			errs = append(errs, fmt.Errorf("%s: stripe-size %q is not a size such as 64k", where, dc.StripeSize))
		}
		target := dc.VolumeGroup
		switch dc.Type {
		case TypeDefault, TypeThick:
			if dc.ThinPool != nil {
				errs = append(errs, fmt.Errorf("%s: thin-pool is only valid with type: thin", where))
			}
		case TypeThin:
			if dc.ThinPool == nil || dc.ThinPool.Name == "" {
				errs = append(errs, fmt.Errorf("%s: type thin needs thin-pool with a name", where))
				break
			}
			if dc.ThinPool.OverprovisionRatio < 1 {
				errs = append(errs, fmt.Errorf("%s: thin-pool overprovision-ratio must be at least 1.0", where))
			}
			for _, t := range []struct {
				key string
				v   *float64
			}{{"data-usage-threshold", dc.ThinPool.DataUsageThreshold}, {"metadata-usage-threshold", dc.ThinPool.MetadataUsageThreshold}} {
				if t.v != nil && (!(*t.v > 0) || *t.v > 100) {
					errs = append(errs, fmt.Errorf("%s: thin-pool %s is %g; it must be a percentage above 0 and at most 100 (leave it out for the default)", where, t.key, *t.v))
				}
			}
			target += "/" + dc.ThinPool.Name
		default:
			errs = append(errs, fmt.Errorf("%s: type %q is neither thick nor thin", where, dc.Type))
		}
		if other, taken := targets[target]; taken && dc.VolumeGroup != "" {
			errs = append(errs, fmt.Errorf("%s and device class %q both allocate from %s", where, other, target))
		}
		targets[target] = dc.Name
	}
	if defaults > 1 {
		errs = append(errs, fmt.Errorf("%d device classes are marked default: at most one may be", defaults))
	}
	for i, oc := range c.LVCreateOptionClasses {
		if oc.Name == "" {
			errs = append(errs, fmt.Errorf("lvcreate-option-classes[%d] has no name", i))
		}
	}
	return errors.Join(errs...)
}

// CheckLVM returns a sentence for every device class whose volume group or thin pool does not exist in
// the node's LVM state, in device class order.
func (c *Config) CheckLVM(rep *lvm.Report) []string {
	var out []string
	for _, dc := range c.DeviceClasses {
		if _, ok := rep.VG(dc.VolumeGroup); !ok {
			out = append(out, fmt.Sprintf("device class %s uses volume group %s, which does not exist on this node", dc.Name, dc.VolumeGroup))
			continue
		}
		if dc.Type == TypeThin && dc.ThinPool != nil {
			if lv, ok := rep.LV(dc.VolumeGroup, dc.ThinPool.Name); !ok || !lv.IsThinPool() {
				out = append(out, fmt.Sprintf("device class %s uses thin pool %s/%s, which does not exist on this node", dc.Name, dc.VolumeGroup, dc.ThinPool.Name))
			}
		}
	}
	return out
}

// DeviceClass returns the named device class.
func (c *Config) DeviceClass(name string) (*DeviceClass, bool) {
	for i := range c.DeviceClasses {
		if c.DeviceClasses[i].Name == name {
			return &c.DeviceClasses[i], true
		}
	}
	return nil, false
}

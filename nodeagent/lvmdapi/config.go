package lvmdapi

import (
	"fmt"
	"slices"
)

// Device class types in lvmd.yaml.
const (
	TypeThick = "thick"
	TypeThin  = "thin"
)

// DefaultSpareGB is the spare capacity lvmd keeps free in a thick device class when spare-gb is omitted.
const DefaultSpareGB = 10

// DeviceClass is one lvmd.yaml device class, as the service needs it.
type DeviceClass struct {
	Name        string
	VolumeGroup string
	Default     bool
	// SpareGB nil means DefaultSpareGB.
	SpareGB         *uint64
	Stripe          *uint
	StripeSize      string
	LVCreateOptions []string
	// Type is "", TypeThick or TypeThin.
	Type     string
	ThinPool *ThinPool
}

// ThinPool is the thin pool of a thin device class.
type ThinPool struct {
	Name               string
	OverprovisionRatio float64
}

// OptionClass is an lvmd.yaml lvcreate-option-class.
type OptionClass struct {
	Name    string
	Options []string
}

// Config is the part of lvmd.yaml the service reads.
type Config struct {
	DeviceClasses []DeviceClass
	OptionClasses []OptionClass
}

// IsThin reports whether the device class allocates from a thin pool.
func (d DeviceClass) IsThin() bool { return d.Type == TypeThin }

// Spare is the spare capacity in bytes.
func (d DeviceClass) Spare() uint64 {
	if d.SpareGB == nil {
		return DefaultSpareGB << 30
	}
	return *d.SpareGB << 30
}

// errUnknownClass is returned for a device class that is not configured.
type errUnknownClass struct{ name string }

func (e errUnknownClass) Error() string { return "device-class not found: " + e.name }

// DeviceClass returns the named device class; "" is the default one.
func (c *Config) DeviceClass(name string) (DeviceClass, error) {
	for _, d := range c.DeviceClasses {
		if (name == "" && d.Default) || (name != "" && d.Name == name) {
			return d, nil
		}
	}
	return DeviceClass{}, errUnknownClass{name: name}
}

// OptionClass returns the named lvcreate option class.
func (c *Config) OptionClass(name string) (OptionClass, bool) {
	i := slices.IndexFunc(c.OptionClasses, func(o OptionClass) bool { return o.Name == name })
	if i < 0 {
		return OptionClass{}, false
	}
	return c.OptionClasses[i], true
}

// Validate checks the rules lvmd enforces at start: at least one device class, every thin class with a
// pool and a ratio of at least 1.
func (c *Config) Validate() error {
	if len(c.DeviceClasses) == 0 {
		return fmt.Errorf("lvmd configuration has no device classes: add at least one under device-classes")
	}
	for _, d := range c.DeviceClasses {
		if d.IsThin() && (d.ThinPool == nil || d.ThinPool.Name == "") {
			return fmt.Errorf("device class %q is thin but has no thin-pool name: set thin-pool.name", d.Name)
		}
		if d.IsThin() && d.ThinPool.OverprovisionRatio < 1 {
			return fmt.Errorf("device class %q: thin-pool overprovision-ratio %v is below 1.0", d.Name, d.ThinPool.OverprovisionRatio)
		}
	}
	return nil
}

package lvmdapi

import (
	"slices"

	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

// DefaultSpareGB is the spare capacity lvmd keeps free in a thick device class when spare-gb is omitted.
const DefaultSpareGB = 10

func isThin(d lvmd.DeviceClass) bool { return d.Type == lvmd.TypeThin && d.ThinPool != nil }

// spare is a device class's spare capacity in bytes.
func spare(d lvmd.DeviceClass) uint64 {
	if d.SpareGB == nil {
		return DefaultSpareGB << 30
	}
	return *d.SpareGB << 30
}

// errUnknownClass is returned for a device class that is not configured.
type errUnknownClass struct{ name string }

func (e errUnknownClass) Error() string { return "device-class not found: " + e.name }

// deviceClass returns the named device class; "" is the default one.
func deviceClass(c *lvmd.Config, name string) (lvmd.DeviceClass, error) {
	for _, d := range c.DeviceClasses {
		if (name == "" && d.Default) || (name != "" && d.Name == name) {
			return d, nil
		}
	}
	return lvmd.DeviceClass{}, errUnknownClass{name: name}
}

// optionClass returns the named lvcreate option class.
func optionClass(c *lvmd.Config, name string) (lvmd.LVCreateOptionClass, bool) {
	i := slices.IndexFunc(c.LVCreateOptionClasses, func(o lvmd.LVCreateOptionClass) bool { return o.Name == name })
	if i < 0 {
		return lvmd.LVCreateOptionClass{}, false
	}
	return c.LVCreateOptionClasses[i], true
}

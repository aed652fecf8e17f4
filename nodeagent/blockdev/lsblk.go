package blockdev

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Columns asked from lsblk. MOUNTPOINTS needs util-linux 2.37; older hosts get LegacyColumns.
var (
	Columns       = "NAME,KNAME,PATH,TYPE,SIZE,ROTA,RO,STATE,MODEL,VENDOR,SERIAL,WWN,PARTLABEL,PARTTYPE,PTTYPE,FSTYPE,MOUNTPOINTS,PKNAME,MAJ:MIN"
	LegacyColumns = strings.Replace(Columns, "MOUNTPOINTS", "MOUNTPOINT", 1)
)

// LsblkArgs are the lsblk arguments for a column list.
func LsblkArgs(columns string) []string {
	return []string{"--json", "--bytes", "--paths", "-o", columns}
}

// flexString accepts a JSON string, number, boolean or null (lsblk versions differ).
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*f = ""
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(strings.TrimSpace(s))
	case b[0] == '{' || b[0] == '[':
		return fmt.Errorf("want a string, got %s", truncate(string(b)))
	default:
		*f = flexString(string(b))
	}
	return nil
}

// flexBool accepts true/false, "0"/"1", 0/1 and null.
type flexBool bool

func (f *flexBool) UnmarshalJSON(b []byte) error {
	var s flexString
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	switch s {
	case "", "0", "false":
		*f = false
	case "1", "true":
		*f = true
	default:
		return fmt.Errorf("want a boolean, got %q", string(s))
	}
	return nil
}

// flexUint accepts a number or a string holding one.
type flexUint uint64

func (f *flexUint) UnmarshalJSON(b []byte) error {
	var s flexString
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	if s == "" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want a size in bytes, got %q", string(s))
	}
	*f = flexUint(n)
	return nil
}

// flexList accepts an array of strings and nulls (MOUNTPOINTS) or one string or null (MOUNTPOINT).
type flexList []string

func (f *flexList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var items []flexString
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		*f = nil
		for _, s := range items {
			if s != "" {
				*f = append(*f, string(s))
			}
		}
		return nil
	}
	var s flexString
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	*f = nil
	if s != "" {
		*f = flexList{string(s)}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// lsblkDevice is one element of lsblk's JSON tree.
type lsblkDevice struct {
	Name        flexString    `json:"name"`
	KName       flexString    `json:"kname"`
	Path        flexString    `json:"path"`
	Type        flexString    `json:"type"`
	Size        flexUint      `json:"size"`
	Rota        flexBool      `json:"rota"`
	RO          flexBool      `json:"ro"`
	State       flexString    `json:"state"`
	Model       flexString    `json:"model"`
	Vendor      flexString    `json:"vendor"`
	Serial      flexString    `json:"serial"`
	WWN         flexString    `json:"wwn"`
	PartLabel   flexString    `json:"partlabel"`
	PartType    flexString    `json:"parttype"`
	PTType      flexString    `json:"pttype"`
	FSType      flexString    `json:"fstype"`
	MountPoints flexList      `json:"mountpoints"`
	MountPoint  flexList      `json:"mountpoint"`
	PKName      flexString    `json:"pkname"`
	MajMin      flexString    `json:"maj:min"`
	Children    []lsblkDevice `json:"children"`
}

// ParseLsblk parses `lsblk --json --bytes --paths` output into devices sorted by KName. A device shown
// under several parents (a multipath map, an md array) appears once, with all its parents.
func ParseLsblk(data []byte) ([]Device, error) {
	var doc struct {
		BlockDevices []lsblkDevice `json:"blockdevices"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse lsblk JSON: %w", err)
	}
	byKName := map[string]*Device{}
	var order []string
	var walk func(d lsblkDevice, parent string, depth int) error
	walk = func(d lsblkDevice, parent string, depth int) error {
		if depth > 32 {
			return fmt.Errorf("parse lsblk JSON: device tree deeper than 32 levels under %s", parent)
		}
		kname := string(d.KName)
		if kname == "" {
			kname = string(d.Name)
		}
		if kname == "" {
			return fmt.Errorf("parse lsblk JSON: a device without name or kname (under %q)", parent)
		}
		dev, seen := byKName[kname]
		if !seen {
			mps := d.MountPoints
			if len(mps) == 0 {
				mps = d.MountPoint
			}
			dev = &Device{
				KName: kname, Name: string(d.Name), Path: string(d.Path), Type: string(d.Type), Size: uint64(d.Size),
				Rotational: bool(d.Rota), ReadOnly: bool(d.RO), State: string(d.State), Model: string(d.Model),
				Vendor: string(d.Vendor), Serial: string(d.Serial), WWN: string(d.WWN),
				PartLabel: string(d.PartLabel), PartType: string(d.PartType), PTType: string(d.PTType),
				FSType: string(d.FSType), MountPoints: slices.Clone([]string(mps)), MajMin: string(d.MajMin),
			}
			if dev.Name == "" {
				dev.Name = kname
			}
			byKName[kname] = dev
			order = append(order, kname)
		}
		if parent != "" && !slices.Contains(dev.Parents, parent) {
			dev.Parents = append(dev.Parents, parent)
		}
		if seen {
			return nil // its children were walked the first time
		}
		for _, c := range d.Children {
			ck := string(c.KName)
			if ck == "" {
				ck = string(c.Name)
			}
			if ck != "" && !slices.Contains(dev.Children, ck) {
				dev.Children = append(dev.Children, ck)
			}
			if err := walk(c, kname, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range doc.BlockDevices {
		if err := walk(d, "", 0); err != nil {
			return nil, err
		}
	}
	slices.Sort(order)
	out := make([]Device, 0, len(order))
	for _, k := range order {
		d := byKName[k]
		slices.Sort(d.Parents)
		slices.Sort(d.Children)
		out = append(out, *d)
	}
	return out, nil
}

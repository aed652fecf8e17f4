package blockdev

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// WipefsArgs are the arguments that list (never erase) the signatures on devices.
func WipefsArgs(devices []string) []string {
	return append([]string{"--no-act", "--json"}, devices...)
}

// ParseWipefs parses `wipefs --json` output into signature types per device, keyed by the device's path
// (wipefs prints bare names such as "loop1" or "sdb1"; they are taken as /dev/<name>). Each device's
// types keep wipefs's order without repeats.
func ParseWipefs(data []byte) (map[string][]string, error) {
	out := map[string][]string{}
	if len(strings.TrimSpace(string(data))) == 0 {
		return out, nil // wipefs prints nothing when no device has a signature
	}
	var doc struct {
		Signatures []struct {
			Device flexString `json:"device"`
			Type   flexString `json:"type"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse wipefs JSON: %w", err)
	}
	for _, s := range doc.Signatures {
		dev, typ := string(s.Device), string(s.Type)
		if dev == "" || typ == "" {
			continue
		}
		if !strings.HasPrefix(dev, "/") {
			dev = filepath.Join("/dev", dev)
		}
		if !contains(out[dev], typ) {
			out[dev] = append(out[dev], typ)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParseBlkidExport parses `blkid -p -o export` output (KEY=value lines, a blank line between devices)
// into key/value maps per DEVNAME.
func ParseBlkidExport(data []byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	var cur map[string]string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			cur = nil
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.ReplaceAll(v, `\ `, " ")
		if k == "DEVNAME" {
			cur = map[string]string{}
			out[v] = cur
			continue
		}
		if cur != nil {
			cur[k] = v
		}
	}
	return out
}

package status

import (
	"slices"
	"testing"
)

func TestStableLinks_KeepsByIDAndByPath(t *testing.T) {
	got := StableLinks([]string{"/dev/disk/by-id/wwn-0x5000c500a0b1c2d3", "/dev/disk/by-path/pci-0000:00:1f.2-ata-1",
		"/dev/disk/by-uuid/1234", "/dev/disk/by-label/data", "/dev/mapper/vg-lv", "/dev/disk/by-id/ata-SAMSUNG_123"})
	want := []string{"/dev/disk/by-id/wwn-0x5000c500a0b1c2d3", "/dev/disk/by-path/pci-0000:00:1f.2-ata-1", "/dev/disk/by-id/ata-SAMSUNG_123"}
	if !slices.Equal(got, want) {
		t.Errorf("StableLinks = %v, want %v (file system UUIDs and labels change with mkfs; mapper names are not disks)", got, want)
	}
}

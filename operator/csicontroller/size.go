package csicontroller

import (
	"fmt"
	"math"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

const gib = 1 << 30

// MinimumAllocation is the smallest volume created per access type and file system (TopoLVM's
// --minimum-allocation-* flags).
type MinimumAllocation struct {
	Block, Ext4, XFS, Btrfs int64
}

// DefaultMinimumAllocation is TopoLVM's default: block 8Mi, ext4 32Mi, xfs 300Mi, btrfs 200Mi.
func DefaultMinimumAllocation() MinimumAllocation {
	return MinimumAllocation{Block: 8 << 20, Ext4: 32 << 20, XFS: 300 << 20, Btrfs: 200 << 20}
}

// For returns the minimum for a set of capabilities (the largest one that applies). The file system
// defaults to ext4.
func (m MinimumAllocation) For(caps []*csi.VolumeCapability) int64 {
	var out int64
	for _, c := range caps {
		var v int64
		switch {
		case c.GetBlock() != nil:
			v = m.Block
		case c.GetMount() != nil:
			switch c.GetMount().GetFsType() {
			case "xfs":
				v = m.XFS
			case "btrfs":
				v = m.Btrfs
			default:
				v = m.Ext4
			}
		}
		out = max(out, v)
	}
	return out
}

// requestSize turns a capacity range into the size to allocate: 1 GiB when nothing is required (or the
// limit rounded down to 4096 bytes when the limit is below 1 GiB), otherwise the required bytes rounded up
// to 4096 bytes, never above the limit.
func requestSize(required, limit, minimum int64) (int64, error) {
	if required < 0 {
		return 0, fmt.Errorf("required capacity %d must not be negative", required)
	}
	if limit < 0 {
		return 0, fmt.Errorf("capacity limit %d must not be negative", limit)
	}
	if limit != 0 && required > limit {
		return 0, fmt.Errorf("requested capacity exceeds the limit: request=%d limit=%d", required, limit)
	}
	if required != 0 && required < minimum && (limit == 0 || minimum <= limit) {
		required = minimum
	}
	if required == 0 {
		if limit == 0 || limit >= gib {
			return gib, nil
		}
		size := limit / driver.SectorSize * driver.SectorSize
		if size == 0 {
			return 0, fmt.Errorf("capacity limit %d is below the smallest volume (%d bytes)", limit, driver.SectorSize)
		}
		return size, nil
	}
	if required > math.MaxInt64-driver.SectorSize {
		return 0, fmt.Errorf("required capacity %d is too large", required)
	}
	size := (required + driver.SectorSize - 1) / driver.SectorSize * driver.SectorSize
	if limit != 0 && size > limit {
		return 0, fmt.Errorf("required capacity %d rounded up to %d bytes exceeds the limit %d", required, size, limit)
	}
	return size, nil
}

func quantity(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }

// Package blockdevtest loads the blockdev fixtures for tests in other packages: the host-loops session
// (real util-linux and lvm2 output recorded on loop devices) and the hand-written server fixture
// (multipath, md RAID, LVs, crypt, a foreign volume group).
package blockdevtest

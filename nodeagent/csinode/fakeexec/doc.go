// Package fakeexec is a stand-in for the block devices and file system tools the CSI node service runs
// (blkid, wipefs, mkfs.*, fsck, resize2fs, xfs_growfs, btrfs, blockdev): it keeps which file system each
// device holds and how often it was grown, so node tests assert on state — a volume formatted once, not
// again on republish; a file system grown after expansion — instead of on command scripts.
package fakeexec

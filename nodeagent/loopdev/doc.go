// Package loopdev is the test harness for real LVM on loop devices: RequireRoot, loop devices on sparse
// files that are always detached, unique names so parallel CI runs never collide, and cleanup of the
// volume groups a test created before its loop devices go away.
package loopdev

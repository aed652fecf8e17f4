// Package volumegroup reconciles a node's volume groups and thin pools with LVM: it creates volume groups
// (tagged "lvms", the tag lvm-operator uses too) from the devices the filters include and extends them when
// devices are added; it never changes a volume group without the tag. It wipes devices once when asked
// (forceWipeDevicesAndDestroyAllData, devices named explicitly, recorded before they are used, never a
// mounted device or one holding our volume group), removes a device the selector dropped only when its
// physical volume is empty (moving data with pvmove is left to the administrator), creates and grows thin
// pools and their metadata, reports pool usage with an alarm, and deletes a volume group that is no longer
// wanted only when no user logical volume is left in it.
//
// Every step is idempotent and observes LVM instead of remembering: a pass interrupted after any command
// (for example between pvcreate and vgcreate) is finished by the next one, which finds the orphan physical
// volumes and uses them. Device-mapper targets the kernel lacks are reported, never run into.
package volumegroup

package provisioner

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// capacityOf reads a node's capacity annotation for a device class; -1 when it has none.
func capacityOf(n *corev1.Node, names driver.Names, deviceClass string) int64 {
	v, ok := n.Annotations[names.CapacityAnnotation(deviceClass)]
	if !ok {
		return -1
	}
	c, err := strconv.ParseInt(v, 10, 64)
	if err != nil || c < 0 {
		return -1
	}
	return c
}

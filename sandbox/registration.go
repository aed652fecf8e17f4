package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// RegisterDriver does for a simulated node what kubelet does when a CSI driver's node plugin registers:
// it asks the node service at socket for its name (GetPluginInfo) and its node ID and topology
// (NodeGetInfo), labels the Node with the topology segments and lists the driver in the node's CSINode.
// The scheduler and the provisioner's capacity publisher go by those, so without them no claim of the
// node's storage classes could be placed.
func RegisterDriver(ctx context.Context, c client.Client, node, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("node %s: CSI socket %s: %w", node, socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var plugin *csi.GetPluginInfoResponse
	var info *csi.NodeGetInfoResponse
	// The socket appears a moment after the agent is ready.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		if plugin, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil {
			return false, nil
		}
		info, err = csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: the CSI node service at %s does not answer: %w", node, socket, err)
	}
	segments := info.GetAccessibleTopology().GetSegments()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, segments)
		return c.Update(ctx, n)
	}); err != nil {
		return fmt.Errorf("node %s: label it with its CSI topology: %w", node, err)
	}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, cn, func() error {
		cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == plugin.GetName() })
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: plugin.GetName(), NodeID: info.GetNodeId(),
			TopologyKeys: slices.Sorted(maps.Keys(segments))})
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %s: register driver %s in its CSINode: %w", node, plugin.GetName(), err)
	}
	return nil
}

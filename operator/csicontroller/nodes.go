package csicontroller

import (
	"context"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeCapacity reads a Node's capacity annotation for a device class; missing or malformed is 0.
func (s *Controller) nodeCapacity(n *corev1.Node, deviceClass string) int64 {
	v, ok := n.Annotations[s.names.CapacityAnnotation(deviceClass)]
	if !ok {
		return 0
	}
	c, err := strconv.ParseUint(v, 10, 64)
	if err != nil || c > 1<<62 {
		return 0
	}
	return int64(c)
}

func (s *Controller) listNodes(ctx context.Context, opts ...client.ListOption) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := s.client.List(ctx, list, opts...); err != nil {
		return nil, status.Errorf(codes.Internal, "list nodes: %v", err)
	}
	return list.Items, nil
}

// nodeWithMostCapacity picks the node with the most free bytes in a device class (ties: first by name).
func (s *Controller) nodeWithMostCapacity(ctx context.Context, deviceClass string) (string, int64, error) {
	nodes, err := s.listNodes(ctx)
	if err != nil {
		return "", 0, err
	}
	var best string
	var most int64 = -1
	for i := range nodes {
		c := s.nodeCapacity(&nodes[i], deviceClass)
		if c > most || (c == most && nodes[i].Name < best) {
			best, most = nodes[i].Name, c
		}
	}
	return best, max(most, 0), nil
}

// capacityOfSegment is the capacity of the node whose topology label equals the segment's value; 0 when
// there is none.
func (s *Controller) capacityOfSegment(ctx context.Context, segments map[string]string, deviceClass string) (int64, error) {
	_, ok := segments[s.names.TopologyKey()]
	if !ok {
		return 0, nil
	}
	nodes, err := s.listNodes(ctx, client.MatchingLabels{s.names.TopologyKey(): segments[s.names.TopologyKey()]})
	if err != nil {
		return 0, err
	}
	if len(nodes) == 0 {
		return 0, nil
	}
	return s.nodeCapacity(&nodes[0], deviceClass), nil
}

// totalCapacity sums a device class's capacity over all nodes.
func (s *Controller) totalCapacity(ctx context.Context, deviceClass string) (int64, error) {
	nodes, err := s.listNodes(ctx)
	if err != nil {
		return 0, err
	}
	var sum int64
	for i := range nodes {
		sum += s.nodeCapacity(&nodes[i], deviceClass)
	}
	return sum, nil
}

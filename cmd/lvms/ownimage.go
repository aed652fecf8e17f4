package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// defaultAgentImage is the node agent's image when the operator runs outside a pod (lvms local, a
// developer's shell) and nothing names one.
const defaultAgentImage = "lvms:latest"

// ownImage is the image the operator's own Pod runs, which the node agent runs too: read from the Pod
// rather than written into the manifests, so that an overlay's `kustomize edit set image` (or a mirror)
// changes both at once. Outside a pod (no POD_NAME) it is defaultAgentImage.
func ownImage(ctx context.Context, cfg *rest.Config, namespace, pod string) (string, error) {
	if pod == "" {
		return defaultAgentImage, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("find the node agent's image from the operator's Pod %s/%s (or set --node-agent-image): %w", namespace, pod, err)
	}
	return podImage(p.Spec.Containers)
}

// operatorContainer is the operator's container in its Deployment.
const operatorContainer = "operator"

func podImage(containers []corev1.Container) (string, error) {
	for _, c := range containers {
		if c.Name == operatorContainer && c.Image != "" {
			return c.Image, nil
		}
	}
	return "", errors.New("the operator's Pod has no container named " + operatorContainer + " with an image: set --node-agent-image")
}

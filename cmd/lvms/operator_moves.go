package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/move"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// setupMoves adds the operator's side of volume moves (`lvms move`): the move controller and the signer of
// the node agents' transfer certificates.
func setupMoves(mgr manager.Manager, cfg *rest.Config, namespace string, n driver.Names) error {
	if err := (&move.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Names: n}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the move controller: %w", err)
	}
	approvals, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("the transfer signer's client: %w", err)
	}
	s := &transferca.Signer{Client: mgr.GetClient(), Approvals: approvals, Namespace: namespace,
		AgentUser: "system:serviceaccount:" + namespace + ":" + names.NodeAgent, Clock: clock.RealClock{}}
	if err := s.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the transfer signer: %w", err)
	}
	return nil
}

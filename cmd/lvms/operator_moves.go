package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/deploy"
	"github.com/lvms-dev/lvms/operator/admission"
	"github.com/lvms-dev/lvms/operator/move"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// setupAdmission runs the guard of the admission policies LVMS needs (operator/admission) and exports its
// metric.
func setupAdmission(mgr manager.Manager) (*admission.Guard, error) {
	var policies []admission.Policy
	for _, m := range deploy.AdmissionPolicies {
		p, err := admission.Parse(m.File, m.Guards, m.Manifest)
		if err != nil {
			return nil, err
		}
		policies = append(policies, p)
	}
	guard := admission.NewGuard(mgr.GetClient(), policies)
	if err := guard.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the admission policies' guard: %w", err)
	}
	if err := ctrlmetrics.Registry.Register(admission.Missing); err != nil {
		return nil, err
	}
	return guard, nil
}

// setupMoves adds the operator's side of volume moves (`lvms move`): the move controller and the signer of
// the node agents' transfer certificates. unsafe says why moves may not start (operator/admission).
func setupMoves(mgr manager.Manager, cfg *rest.Config, namespace string, n driver.Names, unsafe func() string) error {
	if err := (&move.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Names: n, Admission: unsafe}).SetupWithManager(mgr); err != nil {
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

package main

import (
	"fmt"
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// addProbes adds the liveness check and a readiness check that waits for the cache, unless the probe address
// is "0" (probes off).
func addProbes(mgr ctrl.Manager, probeAddr string) error {
	if probeAddr == "0" {
		return nil
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return fmt.Errorf("cache not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	return nil
}

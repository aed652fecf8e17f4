package csivm

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard()) // the components log through controller-runtime; the tests report
	os.Exit(m.Run())
}

package integration

import (
	"os"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// TestDecideGroup: the group follows the cluster's LogicalVolumes unless the flag says otherwise; a flag that
// would run one group's driver over the other group's volumes, or volumes in both, are refused naming what
// to do.
func TestDecideGroup(t *testing.T) {
	cases := []struct {
		name            string
		current, legacy int
		flag, explicit  bool
		want            bool
		err             string
	}{
		{"a new cluster", 0, 0, false, false, false, ""},
		{"TopoLVM's volumes before the rename", 0, 3, false, false, true, ""},
		{"topolvm.io volumes", 4, 0, false, false, false, ""},
		{"--legacy on a new cluster", 0, 0, true, true, true, ""},
		{"--legacy with legacy volumes", 0, 3, true, true, true, ""},
		{"--legacy over topolvm.io volumes", 4, 0, true, true, false, "unset it"},
		{"--legacy=false over legacy volumes", 0, 3, false, true, false, "run LVMS with --legacy"},
		{"volumes in both groups", 4, 3, false, false, false, "in both topolvm.io (4) and topolvm.cybozu.com (3)"},
		{"volumes in both groups, --legacy", 4, 3, true, true, false, "LVMS serves one group"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideGroup(tc.current, tc.legacy, tc.flag, tc.explicit)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got legacy=%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestChooseGroup_FromTheCluster: a cluster whose LogicalVolumes live only in topolvm.cybozu.com is served
// with the legacy names without a flag.
func TestChooseGroup_FromTheCluster(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	ctx := context.Background()
	choose := func(args ...string) (bool, error) {
		t.Setenv("USE_LEGACY", "")
		o := &csiDriverOptions{}
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.addFlags(f, "")
		if err := f.Parse(args); err != nil {
			t.Fatal(err)
		}
		err := chooseGroup(ctx, env.Config, f, o, logr.Discard())
		return o.legacy, err
	}
	if legacy, err := choose(); err != nil || legacy {
		t.Fatalf("no LogicalVolumes: legacy=%v, %v; want topolvm.io", legacy, err)
	}
	lv := &unstructured.Unstructured{}
	lv.SetAPIVersion(topolvmv1.LegacyGroupName + "/v1")
	lv.SetKind("LogicalVolume")
	lv.SetName("pvc-from-topolvm")
	_ = unstructured.SetNestedField(lv.Object, map[string]any{"name": "pvc-from-topolvm", "nodeName": "edge-1", "size": "1Gi"}, "spec")
	if err := env.Client.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	if legacy, err := choose(); err != nil || !legacy {
		t.Fatalf("a legacy LogicalVolume: legacy=%v, %v; want topolvm.cybozu.com", legacy, err)
	}
	if _, err := choose("--legacy=false"); err == nil || !strings.Contains(err.Error(), "run LVMS with --legacy") {
		t.Fatalf("--legacy=false over legacy volumes: %v", err)
	}
}

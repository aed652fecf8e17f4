package lvm

import (
	"context"
	"strings"
	"testing"
)

func TestCheckVolumeRemoval(t *testing.T) {
	tests := []struct {
		name       string
		lv         LV
		wantReason string // "" = allowed
		notAVolume bool
	}{
		{name: "tagged volume", lv: LV{VGName: "vg", Name: "data", Attr: "-wi-a-----", Tags: []string{VolumeTag}}},
		{name: "TopoLVM uid name", lv: LV{VGName: "vg", Name: "0d5f3e6c-8a8e-4b4e-9f7a-2f0f7c1c9a11", Attr: "Vwi-a-tz--"}},
		{name: "thin pool, even tagged and uid-named", lv: LV{VGName: "vg", Name: "0d5f3e6c-8a8e-4b4e-9f7a-2f0f7c1c9a11", Attr: "twi-aotz--", Tags: []string{VolumeTag, OwnerTag}},
			wantReason: "it is a thin pool", notAVolume: true},
		{name: "pool metadata", lv: LV{VGName: "vg", Name: "pool_tmeta", Attr: "ewi-ao----", Role: []string{"private", "thin", "pool", "metadata"}, Tags: []string{VolumeTag}},
			wantReason: "internal LV of lvm2", notAVolume: true},
		{name: "someone else's LV", lv: LV{VGName: "vg", Name: "home", Attr: "-wi-a-----", Tags: []string{"backup"}}, wantReason: `no "lvms-volume" tag`},
		{name: "upper-case UUID is no Kubernetes uid", lv: LV{VGName: "vg", Name: "0D5F3E6C-8A8E-4B4E-9F7A-2F0F7C1C9A11", Attr: "-wi-a-----"}, wantReason: "not a LogicalVolume uid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := &scripted{answers: map[string]Result{}}
			err := Runner{Exec: ex}.RemoveVolume(context.Background(), tc.lv)
			if tc.wantReason == "" {
				if len(ex.ran) != 1 || !strings.Contains(ex.ran[0].String(), "lvremove") {
					t.Errorf("ran %v, want one lvremove", ex.ran)
				}
				return
			}
			re, ok := AsRemovalRefused(err)
			if !ok || !strings.Contains(err.Error(), tc.wantReason) || !strings.Contains(err.Error(), "vg/"+tc.lv.Name) || re.NotAVolume != tc.notAVolume {
				t.Errorf("err = %v, want a refusal naming vg/%s with %q (not a volume: %v)", err, tc.lv.Name, tc.wantReason, tc.notAVolume)
			}
			if len(ex.ran) != 0 {
				t.Errorf("a refused removal ran %v", ex.ran)
			}
		})
	}
}

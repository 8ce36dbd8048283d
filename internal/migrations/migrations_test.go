package migrations

import (
	"testing"
	"testing/fstest"
)

func TestMustLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_more.sql":  {Data: []byte("two")},
		"m/0001_first.sql": {Data: []byte("one")},
	}
	got := MustLoad(fsys, "m", "test")
	if len(got) != 2 || got[0].Version != 1 || got[0].Name != "0001_first" || got[0].SQL != "one" || got[1].Version != 2 {
		t.Fatalf("MustLoad = %+v", got)
	}
	for name, bad := range map[string]fstest.MapFS{
		"a gap":    {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"bad name": {"m/first.sql": {}},
		"zero":     {"m/0000_z.sql": {}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("%s: no panic", name)
				}
			}()
			MustLoad(bad, "m", "test")
		})
	}
}

package framework

import "testing"

func TestThrottleFiles(t *testing.T) {
	if got := throttleLine("254:0", 8); got != "254:0 8" {
		t.Fatalf("throttleLine = %q", got)
	}
	for _, c := range []struct {
		content string
		want    bool
	}{
		{"254:0 8\n", true},
		{"253:0 8\n254:0 4\n", true},
		{"253:0 8\n", false},
		{"254:0 0\n", false},
		{"", false},
	} {
		if got := throttled(c.content, "254:0"); got != c.want {
			t.Errorf("throttled(%q) = %t", c.content, got)
		}
	}
	serviced := "254:0 Read 2\n254:0 Write 187\n254:0 Sync 189\n254:0 Async 0\n253:0 Write 5\nTotal 189\n"
	if got := servicedWrites(serviced, "254:0"); got != 187 {
		t.Fatalf("servicedWrites = %d", got)
	}
	if got := servicedWrites(serviced, "8:0"); got != 0 {
		t.Fatalf("servicedWrites of another device = %d", got)
	}
}

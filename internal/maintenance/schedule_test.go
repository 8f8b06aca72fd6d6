package maintenance

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestWindow(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name     string
		schedule string
		length   time.Duration
		now      string
		open     bool
		next     string
	}{
		{"at the tick", "0 2 * * *", time.Hour, "2026-03-01T02:00:00Z", true, "2026-03-02T02:00:00Z"},
		{"inside the window", "0 2 * * *", time.Hour, "2026-03-01T02:59:59Z", true, "2026-03-02T02:00:00Z"},
		{"the window has closed", "0 2 * * *", time.Hour, "2026-03-01T03:00:00Z", false, "2026-03-02T02:00:00Z"},
		{"before the tick", "0 2 * * *", time.Hour, "2026-03-01T01:59:00Z", false, "2026-03-01T02:00:00Z"},
		{"the default window is an hour", "0 2 * * *", 0, "2026-03-01T02:30:00Z", true, "2026-03-02T02:00:00Z"},
		{"UTC unless a zone is named", "CRON_TZ=Europe/Berlin 0 2 * * *", time.Hour, "2026-03-01T01:30:00Z", true, "2026-03-02T01:00:00Z"},
		{"a descriptor", "@weekly", 6 * time.Hour, "2026-03-01T05:00:00Z", true, "2026-03-08T00:00:00Z"},
		{"a window longer than the interval is always open", "@hourly", 2 * time.Hour, "2026-03-01T05:17:00Z", true, "2026-03-01T06:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			w, err := ParseWindow(tc.schedule, tc.length)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.Open(at(tc.now))).To(Equal(tc.open))
			g.Expect(w.NextOpen(at(tc.now)).UTC()).To(Equal(at(tc.next)))
		})
	}
}

func TestWindowNone(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	w, err := ParseWindow("", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w).To(BeNil())
	g.Expect(w.Open(time.Now())).To(BeTrue(), "no schedule: any time")
	g.Expect(w.String()).To(Equal("at any time"))
}

func TestWindowBadSchedule(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	for _, bad := range []string{"61 * * * *", "* * *", "@fortnightly", "CRON_TZ=Nowhere/Atlantis 0 2 * * *"} {
		_, err := ParseWindow(bad, time.Hour)
		g.Expect(err).To(MatchError(HavePrefix(`failed to parse schedule "`+bad+`": `)), bad)
	}
}

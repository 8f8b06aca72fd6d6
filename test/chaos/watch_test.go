package chaos

import (
	"encoding/json"
	"strings"
	"testing"
)

// The hand-made history: a writer's puts and deletes of /p/a and /p/b, one
// transaction of two keys at 16, a put of unknown outcome that took effect
// (at 17) and one that did not, and a compaction at 13.
//
//	10 put a=v1 (create)   11 put b=v2 (create)   12 put a=v3
//	13 delete b            14 put b=v4 (create)   15 put a=v5
//	16 put c=v6, d=v7 (one transaction)           17 put a=v8 (unknown)
func goodWatchHistory() WatchHistory {
	a1 := &KV{Key: "/p/a", Value: "v1", CreateRevision: 10, ModRevision: 10}
	b2 := &KV{Key: "/p/b", Value: "v2", CreateRevision: 11, ModRevision: 11}
	a3 := &KV{Key: "/p/a", Value: "v3", CreateRevision: 10, ModRevision: 12}
	a5 := &KV{Key: "/p/a", Value: "v5", CreateRevision: 10, ModRevision: 15}
	ev := map[int64][]WatchEvent{
		10: {{KV: *a1}},
		11: {{KV: *b2}},
		12: {{KV: *a3, Prev: a1}},
		13: {{Delete: true, KV: KV{Key: "/p/b", ModRevision: 13}, Prev: b2}},
		14: {{KV: KV{Key: "/p/b", Value: "v4", CreateRevision: 14, ModRevision: 14}}},
		15: {{KV: *a5, Prev: a3}},
		16: {{KV: KV{Key: "/p/c", Value: "v6", CreateRevision: 16, ModRevision: 16}}, {KV: KV{Key: "/p/d", Value: "v7", CreateRevision: 16, ModRevision: 16}}},
		17: {{KV: KV{Key: "/p/a", Value: "v8", CreateRevision: 10, ModRevision: 17}, Prev: a5}},
	}
	resp := func(revs ...int64) WatchRecord {
		r := WatchRecord{Kind: WatchResponse, Revision: revs[len(revs)-1]}
		for _, rev := range revs {
			r.Events = append(r.Events, ev[rev]...)
		}
		return r
	}
	return WatchHistory{
		Prefix: "/p/",
		Writes: []KubeWrite{
			{Key: "/p/a", Value: "v1", Revision: 10}, {Key: "/p/b", Value: "v2", Revision: 11},
			{Key: "/p/a", Value: "v3", Revision: 12}, {Key: "/p/b", Delete: true, Revision: 13},
			{Key: "/p/b", Value: "v4", Revision: 14}, {Key: "/p/a", Value: "v5", Revision: 15},
			{Key: "/p/c", Value: "v6", Revision: 16}, {Key: "/p/d", Value: "v7", Revision: 16},
			{Key: "/p/a", Value: "v8"}, {Key: "/p/b", Value: "never"},
		},
		Compactions: []int64{13},
		Watchers: []WatcherLog{
			{Name: "w1", Records: []WatchRecord{
				{Kind: WatchList, Revision: 9},
				{Kind: WatchStart, Revision: 10},
				resp(10, 11),
				resp(12, 13),
				{Kind: WatchEnd, Err: "canceled"},
				{Kind: WatchStart, Revision: 14},
				resp(14, 15),
				{Kind: WatchResponse, Revision: 15, Progress: true},
				resp(16),
				resp(17),
				{Kind: WatchResponse, Revision: 17, Progress: true},
			}},
			{Name: "w2", Records: []WatchRecord{
				{Kind: WatchList, Revision: 9},
				{Kind: WatchStart, Revision: 10},
				resp(10, 11, 12),
				{Kind: WatchEnd, Compacted: true, Revision: 14, Err: "compacted"},
				// 13 and 14 are skipped: the watcher lists again over them.
				{Kind: WatchList, Revision: 14},
				{Kind: WatchStart, Revision: 15},
				resp(15, 16),
				resp(17),
			}},
		},
	}
}

// clone deep-copies a history through JSON, so a case can break its copy.
func clone(t *testing.T, h WatchHistory) WatchHistory {
	t.Helper()
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out WatchHistory
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckWatchesAcceptsAGoodHistory(t *testing.T) {
	events, v := CheckWatches(goodWatchHistory())
	if len(v) != 0 {
		t.Fatalf("a good history: %v", v)
	}
	if events != 9+7 {
		t.Fatalf("want 16 events checked, got %d", events)
	}
}

// Each case breaks one guarantee in the good history; the checker must name
// that guarantee.
func TestCheckWatchesCatchesEachBrokenGuarantee(t *testing.T) {
	w1 := func(h *WatchHistory) []WatchRecord { return h.Watchers[0].Records }
	cases := []struct {
		name   string
		inv    string
		detail string
		breaks func(h *WatchHistory)
	}{
		{"events out of order in a response", InvWatchOrdered, "received revision 10 after revision 11", func(h *WatchHistory) {
			e := w1(h)[2].Events
			e[0], e[1] = e[1], e[0]
		}},
		{"a list before an event already seen", InvWatchOrdered, "listed at revision 10, after it had received an event at 12", func(h *WatchHistory) {
			h.Watchers[1].Records[4].Revision = 10
		}},
		{"an event twice", InvWatchUnique, "/p/b at revision 11 twice", func(h *WatchHistory) {
			r := w1(h)
			r[3].Events = append([]WatchEvent{r[2].Events[1]}, r[3].Events...)
		}},
		{"a revision split across responses", InvWatchAtomic, "1 of the 2 writes of revision 16", func(h *WatchHistory) {
			r := w1(h)
			split := WatchRecord{Kind: WatchResponse, Revision: 16, Events: r[8].Events[1:]}
			r[8].Events = r[8].Events[:1]
			h.Watchers[0].Records = append(r[:9], append([]WatchRecord{split}, r[9:]...)...)
		}},
		{"a write missing in the stream", InvWatchReliable, "missed 1 writes, the first a put of /p/a=\"v3\" at revision 12", func(h *WatchHistory) {
			w1(h)[3].Events = w1(h)[3].Events[1:]
		}},
		{"an acknowledged write no watcher saw", InvWatchReliable, "a put of /p/e=\"v9\" at revision 16", func(h *WatchHistory) {
			h.Writes = append(h.Writes, KubeWrite{Key: "/p/e", Value: "v9", Revision: 16})
		}},
		{"a restart that skips its first write", InvWatchResumable, "watched revisions 14 to 17 and missed 1 writes, the first a put of /p/b=\"v4\" at revision 14", func(h *WatchHistory) {
			w1(h)[6].Events = w1(h)[6].Events[1:]
		}},
		{"a restart that goes back", InvWatchResumable, "watched from revision 14 and received revision 13", func(h *WatchHistory) {
			r := w1(h)
			r[3].Events = r[3].Events[:1]
			r[6].Events = append([]WatchEvent{{Delete: true, KV: KV{Key: "/p/b", ModRevision: 13}, Prev: &KV{Key: "/p/b", Value: "v2", CreateRevision: 11, ModRevision: 11}}}, r[6].Events...)
		}},
		{"a progress notification before the last event", InvWatchBookmarkable, "progress notification at revision 14 after an event at 15", func(h *WatchHistory) {
			w1(h)[7].Revision = 14
		}},
		{"an event a progress notification had passed", InvWatchBookmarkable, "received revision 16 after a progress notification at 16", func(h *WatchHistory) {
			w1(h)[7].Revision = 16
		}},
		{"a wrong previous value", InvWatchPrevKV, "previous /p/a=\"v1\" (of 10), but the key held \"v3\" (of 12)", func(h *WatchHistory) {
			w1(h)[6].Events[1].Prev = &KV{Key: "/p/a", Value: "v1", CreateRevision: 10, ModRevision: 10}
		}},
		{"a previous value missing", InvWatchPrevKV, "no previous value, but the key held \"v5\" (of 15)", func(h *WatchHistory) {
			w1(h)[9].Events[0].Prev = nil
		}},
		{"a previous value for a new key", InvWatchPrevKV, "previous value \"v2\" (of 11), but the key did not exist", func(h *WatchHistory) {
			w1(h)[6].Events[0].Prev = &KV{Key: "/p/b", Value: "v2", CreateRevision: 11, ModRevision: 11}
		}},
		{"a re-creation not marked as one", InvWatchIsCreate, "create revision 11, but the key did not exist before", func(h *WatchHistory) {
			w1(h)[6].Events[0].KV.CreateRevision = 11
		}},
		{"an update marked as a creation", InvWatchIsCreate, "as a creation, but the key existed", func(h *WatchHistory) {
			w1(h)[3].Events[0].KV.CreateRevision = 12
		}},
		{"an event no write explains", InvWatchValid, "a put of /p/a=\"x\" at revision 17, which no write of unknown outcome explains", func(h *WatchHistory) {
			for _, w := range h.Watchers {
				r := w.Records[len(w.Records)-1]
				if w.Name == "w1" {
					r = w.Records[len(w.Records)-2]
				}
				r.Events[0].KV.Value = "x"
			}
		}},
		{"an event that contradicts an acknowledged write", InvWatchValid, "received a put of /p/a=\"v1\" at revision 12, but the write there was a put of /p/a=\"v3\"", func(h *WatchHistory) {
			w1(h)[3].Events[0].KV.Value = "v1"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := clone(t, goodWatchHistory())
			c.breaks(&h)
			_, v := CheckWatches(h)
			for _, x := range v {
				if x.Invariant == c.inv && strings.Contains(x.Detail, c.detail) {
					return
				}
			}
			t.Fatalf("want a %s violation with %q, got %v", c.inv, c.detail, v)
		})
	}
}

// etcd reads an event's previous value at the revision before it; once
// that revision is compacted it sends none, which is not a violation.
func TestCheckWatchesAcceptsNoPreviousValueOverACompaction(t *testing.T) {
	h := clone(t, goodWatchHistory())
	h.Watchers[0].Records[3].Events[0].Prev = nil // revision 12, compacted at 13
	if _, v := CheckWatches(h); len(v) != 0 {
		t.Fatalf("no previous value at a compacted revision: %v", v)
	}
}

func TestCheckWatchesBoundsItsList(t *testing.T) {
	h := clone(t, goodWatchHistory())
	for i := range 40 {
		h.Writes = append(h.Writes, KubeWrite{Key: "/p/x", Value: "y", Revision: int64(100 + i)})
		h.Watchers[0].Records = append(h.Watchers[0].Records, WatchRecord{Kind: WatchStart, Revision: int64(100 + i)},
			WatchRecord{Kind: WatchResponse, Revision: int64(100 + i), Progress: true})
	}
	_, v := CheckWatches(h)
	if len(v) != maxWatchViolations+1 || !strings.Contains(v[maxWatchViolations].Detail, "and 20 more") {
		t.Fatalf("want %d violations and a count of the rest, got %d: %v", maxWatchViolations, len(v), v)
	}
}

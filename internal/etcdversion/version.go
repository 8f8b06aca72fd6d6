package etcdversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an etcd release.
type Version struct {
	Major, Minor, Patch int
}

// Parse reads a version in MAJOR.MINOR.PATCH form, with or without a leading
// "v" (image tags carry one, etcd's Status does not). Pre-releases and build
// metadata are refused: the operator only runs releases.
func Parse(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("etcd version %q is not in MAJOR.MINOR.PATCH form, such as 3.6.16", s)
	}
	var n [3]int
	for i, p := range parts {
		// Atoi would accept a sign; a leading zero would make two spellings
		// of one version.
		if p == "" || strings.TrimLeft(p, "0123456789") != "" || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("etcd version %q is not in MAJOR.MINOR.PATCH form, such as 3.6.16", s)
		}
		v, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("etcd version %q is out of range: %w", s, err)
		}
		n[i] = v
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// MustParse is Parse for versions known to be valid, such as constants.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is the minor line, such as "3.6".
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than o.
func (v Version) Compare(o Version) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// SameMinor says v and o are releases of one minor line.
func (v Version) SameMinor(o Version) bool { return v.Major == o.Major && v.Minor == o.Minor }

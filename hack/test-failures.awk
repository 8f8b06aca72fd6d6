# Prints, after a failed `go test -v` run, which tests failed and the last
# lines each one logged. CI shows only the end of its output, and there the
# operator's logs and the teardown bury the FAIL lines of parallel tests.
# usage: awk -v KEEP=N -f hack/test-failures.awk go-test.log (the last N
# messages of each failed test)
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
/^[ ]*--- (PASS|SKIP): / { next }
/^[ ]*--- FAIL: / {
	name = $3
	if (!(name in failed)) { failed[name] = 1; order[++n] = name }
	# A parent fails when a subtest does; only the subtests' lines matter then.
	p = name; sub(/\/[^\/]*$/, "", p)
	if (p != name) parent[p] = 1
	next
}
/^panic: / || /^FAIL\t/ { extra[++x] = $0; inpanic = ($0 ~ /^panic: /) ? 20 : 0; next }
inpanic > 0 { extra[++x] = $0; inpanic--; next }
/^[ ]+[A-Za-z0-9_]+\.go:[0-9]+: / {
	if (cur == "") next
	l = $0; sub(/^[ ]+/, "", l)
	c = ++count[cur]; lines[cur, c] = l
	next
}
# A multi-line message goes on, further indented, under its first line.
/^        / && cur != "" && count[cur] > 0 {
	l = $0; sub(/^[ ]+/, "", l)
	if (length(lines[cur, count[cur]]) < 600) lines[cur, count[cur]] = lines[cur, count[cur]] " | " l
}
END {
	if (n == 0 && x == 0) exit 0
	print "==================== failed tests ===================="
	for (i = 1; i <= n; i++) {
		name = order[i]
		print "--- FAIL: " name
		if (name in parent) continue
		from = count[name] - KEEP + 1; if (from < 1) from = 1
		for (j = from; j <= count[name]; j++) print "    " substr(lines[name, j], 1, 600)
	}
	for (i = 1; i <= x && i <= 40; i++) print extra[i]
	print "======================================================"
}

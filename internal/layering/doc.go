// Package layering holds the test that enforces p2pmsg's import rules: the
// endpoint knows no pipes, pipes know no sockets, codecs depend on the
// encoding layer and never the reverse, the foundation packages do no
// networking, and nothing imports cmd/ or testplans/.
package layering

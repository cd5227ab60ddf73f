package redis

import (
	"context"
	"fmt"
	"math"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// A client runs the script on one of the two client libraries. Both send EVALSHA and, when the server answers NOSCRIPT (a
// restart, a SCRIPT FLUSH), send the script itself with EVAL, which
// loads it again.
type client interface {
	// eval runs the script once, for one request.
	eval(ctx context.Context, keys, args []string) (words, error)
	// evalMulti runs the calls, pipelined: one round trip per server. It
	// writes the reply to each request of each call to out, in the calls'
	// order: out holds the sum of the calls' n.
	evalMulti(ctx context.Context, calls []call, out []reply)
	// grouping says which requests one call may decide together.
	grouping() grouping
	close()
}

// A call is one script call, deciding one request, or a batch of n when
// n is more than 1.
type call struct {
	keys, args []string
	n          int
	batchable  bool      // see batchable
	pooled     *[]string // a batch's: the list keys and args are cut from
}

// A reply is the script's answer to one request.
type reply struct {
	v   words
	err error
}

// words are the eight numbers of the script's reply to one request (see
// decide.lua).
type words [8]int64

// unpack reads a reply of the script: eight little-endian doubles, each
// an integer.
func unpack(s string, err error) (words, error) {
	var w words
	if err != nil {
		return w, err
	}
	if len(s) != 8*len(w) {
		return w, fmt.Errorf("%w: %d bytes", errReply, len(s))
	}
	for i := range w {
		var u uint64
		for j := 7; j >= 0; j-- {
			u = u<<8 | uint64(s[8*i+j])
		}
		f := math.Float64frombits(u)
		if f != math.Trunc(f) || math.Abs(f) > 1<<62 { // also NaN, ±Inf
			return w, fmt.Errorf("%w: word %d is %v", errReply, i, f)
		}
		w[i] = int64(f)
	}
	return w, nil
}

// rueidisClient runs the scripts on rueidis, whose auto-pipelining lets
// concurrent calls share connections and round trips.
type rueidisClient struct {
	c   rueidis.Client
	lua *rueidis.Lua
}

func newRueidisClient(c rueidis.Client) *rueidisClient {
	return &rueidisClient{c: c, lua: rueidis.NewLuaScript(decideLua)}
}

func (r *rueidisClient) eval(ctx context.Context, keys, args []string) (words, error) {
	return unpack(r.lua.Exec(ctx, r.c, keys, args).ToString())
}

func (r *rueidisClient) evalMulti(ctx context.Context, calls []call, out []reply) {
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = r.c.B().Evalsha().Sha1(scriptSHA).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
	}
	o := 0
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		c := &calls[i]
		if errNoScript(res.Error()) {
			res = r.lua.Exec(ctx, r.c, c.keys, c.args)
		}
		if c.n == 1 {
			out[o].v, out[o].err = unpack(res.ToString())
		} else {
			msgs, err := res.ToArray()
			splitBatch(out[o:o+c.n], len(msgs), err, func(j int) (words, error) { return unpack(msgs[j].ToString()) })
		}
		o += c.n
	}
}

func (r *rueidisClient) grouping() grouping {
	if r.c.Mode() == rueidis.ClientModeCluster {
		return bySlot
	}
	return oneNode
}

func (r *rueidisClient) close() { r.c.Close() }

// splitBatch writes the replies of a batch call to out: err for each if
// the call failed or its reply does not hold one element per request,
// else element j's, read by elem.
func splitBatch(out []reply, elems int, err error, elem func(j int) (words, error)) {
	if err == nil && elems != len(out) {
		err = fmt.Errorf("%w: %d replies to a batch of %d", errReply, elems, len(out))
	}
	for j := range out {
		if err != nil {
			out[j] = reply{err: err}
			continue
		}
		out[j].v, out[j].err = elem(j)
	}
}

// goRedisClient runs the scripts on go-redis.
type goRedisClient struct {
	c      goredis.UniversalClient
	script *goredis.Script
}

func newGoRedisClient(c goredis.UniversalClient) *goRedisClient {
	return &goRedisClient{c: c, script: goredis.NewScript(decideLua)}
}

func (g *goRedisClient) eval(ctx context.Context, keys, args []string) (words, error) {
	return unpack(g.script.Run(ctx, g.c, keys, anys(args)...).Text())
}

func (g *goRedisClient) evalMulti(ctx context.Context, calls []call, out []reply) {
	pipe := g.c.Pipeline()
	cmds := make([]*goredis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = g.script.EvalSha(ctx, pipe, c.keys, anys(c.args)...)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	o := 0
	for i, cmd := range cmds {
		c := &calls[i]
		if errNoScript(cmd.Err()) {
			cmd = g.script.Run(ctx, g.c, c.keys, anys(c.args)...)
		}
		if c.n == 1 {
			out[o].v, out[o].err = unpack(cmd.Text())
		} else {
			elems, err := cmd.Slice()
			splitBatch(out[o:o+c.n], len(elems), err, func(j int) (words, error) { return element(elems[j]) })
		}
		o += c.n
	}
}

// element reads one element of a batch reply: the script's reply or an
// error.
func element(elem any) (words, error) {
	switch e := elem.(type) {
	case error:
		return words{}, e
	case string:
		return unpack(e, nil)
	}
	return words{}, fmt.Errorf("%w: element %T", errReply, elem)
}

func (g *goRedisClient) grouping() grouping {
	switch g.c.(type) {
	case *goredis.ClusterClient:
		return bySlot
	case *goredis.Ring:
		return byTag
	}
	return oneNode
}

func (g *goRedisClient) close() { _ = g.c.Close() }

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// A client runs the decide script on one of the two client libraries.
// Both send EVALSHA and, when the server answers NOSCRIPT (a restart, a
// SCRIPT FLUSH), send the script itself with EVAL, which loads it again.
type client interface {
	// eval runs the script once.
	eval(ctx context.Context, keys, args []string) ([]int64, error)
	// evalMulti runs it once per call, pipelined: one round trip per
	// server. Replies and errors come back in the calls' order.
	evalMulti(ctx context.Context, calls []call) ([][]int64, []error)
	close()
}

type call struct{ keys, args []string }

// rueidisClient runs the script on rueidis, whose auto-pipelining lets
// concurrent calls share connections and round trips.
type rueidisClient struct {
	c   rueidis.Client
	lua *rueidis.Lua
	sha string
}

func newRueidisClient(c rueidis.Client) *rueidisClient {
	return &rueidisClient{c: c, lua: rueidis.NewLuaScript(decideLua), sha: scriptSHA}
}

func (r *rueidisClient) eval(ctx context.Context, keys, args []string) ([]int64, error) {
	return ints(r.lua.Exec(ctx, r.c, keys, args).ToArray())
}

func (r *rueidisClient) evalMulti(ctx context.Context, calls []call) ([][]int64, []error) {
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = r.c.B().Evalsha().Sha1(r.sha).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
	}
	out, errs := make([][]int64, len(calls)), make([]error, len(calls))
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		out[i], errs[i] = ints(res.ToArray())
		if errNoScript(errs[i]) {
			out[i], errs[i] = r.eval(ctx, calls[i].keys, calls[i].args)
		}
	}
	return out, errs
}

func (r *rueidisClient) close() { r.c.Close() }

func ints(msgs []rueidis.RedisMessage, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	v := make([]int64, len(msgs))
	for i, m := range msgs {
		if v[i], err = m.AsInt64(); err != nil {
			return nil, fmt.Errorf("%w: %w", errReply, err)
		}
	}
	return v, nil
}

// goRedisClient runs the script on go-redis.
type goRedisClient struct {
	c      goredis.UniversalClient
	script *goredis.Script
}

func newGoRedisClient(c goredis.UniversalClient) *goRedisClient {
	return &goRedisClient{c: c, script: goredis.NewScript(decideLua)}
}

func (g *goRedisClient) eval(ctx context.Context, keys, args []string) ([]int64, error) {
	return g.script.Run(ctx, g.c, keys, anys(args)...).Int64Slice()
}

func (g *goRedisClient) evalMulti(ctx context.Context, calls []call) ([][]int64, []error) {
	pipe := g.c.Pipeline()
	cmds := make([]*goredis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = g.script.EvalSha(ctx, pipe, c.keys, anys(c.args)...)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	out, errs := make([][]int64, len(calls)), make([]error, len(calls))
	for i, cmd := range cmds {
		out[i], errs[i] = cmd.Int64Slice()
		if errNoScript(errs[i]) {
			out[i], errs[i] = g.eval(ctx, calls[i].keys, calls[i].args)
		}
	}
	return out, errs
}

func (g *goRedisClient) close() { _ = g.c.Close() }

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

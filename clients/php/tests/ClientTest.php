<?php

declare(strict_types=1);

use Sluice\Client;
use Sluice\InvalidRequest;
use Sluice\RateLimiter;
use Sluice\RateLimitExceeded;
use Sluice\Unavailable;

/** Plays one call of the script; returns its answer as the wants are written, or null for an op this client lacks. */
function play(Client $c, array $call): ?array
{
    $rule = $call['rule'] ?? '';
    $key = isset($call['key_hex']) ? hex2bin($call['key_hex']) : ($call['key'] ?? '');
    $cost = $call['cost'] ?? 1;
    $decided = fn ($d, bool $outcome = false) => ['allowed' => $d->allowed, 'remaining' => $d->remaining, 'limit' => $d->limit, 'waits' => $d->retryAfter > 0]
        + ($outcome ? ['duplicate' => $d->duplicate] : []);
    try {
        return match ($call['op']) {
            'check' => $decided($c->check($rule, $key, $cost)),
            'peek' => $decided($c->peek($rule, $key)),
            'insert' => $decided($c->insert($rule, $key, $cost)),
            'reset' => (function () use ($c, $rule, $key) { $c->reset($rule, $key); return []; })(),
            'reserve' => $decided($c->reserve($rule, $key, $call['id'], $cost), true),
            'commit' => $decided($c->commit($rule, $key, $call['id'], $cost), true),
            'refund' => $decided($c->refund($rule, $key, $call['id'], $cost), true),
            'report' => $decided($c->report($rule, $key, $call['id'], $call['outcome'], $cost), true),
            default => null,
        };
    } catch (InvalidRequest $e) {
        assert_true(str_contains($e->getMessage(), "'$rule'"), "the error does not name the rule: " . $e->getMessage());
        return ['error' => 'invalid'];
    }
}

function sort_keys(array $a): array
{
    ksort($a);
    return $a;
}

function test_script(): void
{
    $s = new Server();
    $c = new Client($s->url, ['timeout' => 5]);
    $played = 0;
    foreach (script()['calls'] as $i => $call) {
        $got = play($c, $call);
        if ($got === null) {
            continue;
        }
        $played++;
        assert_same(sort_keys($call['want']), sort_keys($got), "call $i " . json_encode($call));
    }
    assert_true($played > 30, "played $played calls");
}

function test_rate_limiter(): void
{
    // The seed's shape: check throws with the wait, insert counts.
    $s = new Server();
    $logins = new RateLimiter(new Client($s->url, ['timeout' => 5]), 'login');
    for ($i = 0; $i < 3; $i++) {
        $logins->check('203.0.113.7');      // before the password
        $logins->insert('203.0.113.7');     // the password was wrong
    }
    $e = assert_throws(RateLimitExceeded::class, fn () => $logins->check('203.0.113.7'), 'check over the limit');
    assert_true($e->getRetryAfter() > 1000 && $e->getRetryAfter() <= 1200, 'wait ' . $e->getRetryAfter());
    assert_same(1200, $e->decision->retryAfterSeconds(), 'whole seconds');
    assert_true(str_contains($e->getMessage(), "rule 'login'"), $e->getMessage());
    $logins->reset('203.0.113.7');
    assert_same(2, $logins->attempt('203.0.113.7')->remaining, 'after a reset');
    $logins->attempt('203.0.113.7');
    $logins->attempt('203.0.113.7');
    assert_throws(RateLimitExceeded::class, fn () => $logins->attempt('203.0.113.7'), 'attempt over the limit');
}

function test_down(): void
{
    $bad = new BadServer(null);
    $url = 'http://127.0.0.1:9'; // discard: nothing listens
    foreach (['open' => true, 'closed' => false] as $failure => $allowed) {
        foreach ([$url, $bad->url] as $u) {
            $c = new Client($u, ['timeout' => 0.3, 'failure' => $failure]);
            $t = microtime(true);
            $d = $c->check('login', 'k');
            // A call its timeout failed to end would hang on $bad, which never
            // answers; a bound of seconds tells that from a loaded machine.
            assert_true(microtime(true) - $t < 10, "took " . (microtime(true) - $t));
            assert_same($allowed, $d->allowed, "$u failing $failure");
            assert_true($d->error instanceof Unavailable, 'error');
            assert_same($allowed ? 0.0 : 1.0, $d->retryAfter, 'retry after');
            assert_throws(Unavailable::class, fn () => $c->commit('login', 'k', 'id-1'), 'commit');
        }
    }
    $e = assert_throws(RateLimitExceeded::class, fn () => (new RateLimiter(new Client($url, ['timeout' => 0.3, 'failure' => 'closed']), 'login'))->check('k'));
    assert_same(1.0, $e->getRetryAfter(), 'the failure policy\'s wait');
}

function test_garbage(): void
{
    $answers = [
        http_answer('200 OK', '<html>a proxy</html>', 'text/html'),
        http_answer('200 OK', '{"rule":"login"}'),
        http_answer('200 OK', '[1,2,3]'),
        http_answer('502 Bad Gateway', 'upstream down', 'text/plain'),
        "SSH-2.0-OpenSSH_9.2\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"allowed\":",
    ];
    foreach ($answers as $a) {
        $bad = new BadServer($a);
        $c = new Client($bad->url, ['timeout' => 0.5, 'failure' => 'closed']);
        $t = microtime(true);
        $d = $c->check('login', 'k');
        assert_true(microtime(true) - $t < 10, 'took ' . (microtime(true) - $t)); // a hang guard, as in test_down
        assert_true($d->error instanceof Unavailable && !$d->allowed, 'garbage ' . substr($a, 0, 30));
    }
}

function test_misconfigured_rule(): void
{
    $s = new Server();
    $c = new Client($s->url, ['timeout' => 5]);
    foreach (['check', 'peek', 'insert'] as $m) {
        $e = assert_throws(InvalidRequest::class, fn () => $c->$m('logn', 'k'), $m);
        assert_true(str_contains($e->getMessage(), "rule 'logn'") && str_contains($e->getMessage(), 'unknown rule'), $e->getMessage());
        assert_same(400, $e->status, 'status');
    }
}

function test_keys_of_any_bytes(): void
{
    $s = new Server();
    $c = new Client($s->url, ['timeout' => 5]);
    foreach (["\x00\xff", "\xc3", 'ключ', str_repeat('k', 50000)] as $key) {
        assert_true($c->check('api', $key)->allowed, 'key ' . bin2hex(substr($key, 0, 4)));
    }
    $e = assert_throws(InvalidRequest::class, fn () => $c->check('api', str_repeat('k', 70000)));
    assert_same(413, $e->status, 'a key beyond the body limit');
}

function test_keep_alive(): void
{
    // Every call after the first reuses its connection: curl opens none.
    $s = new Server();
    $c = new Client($s->url, ['timeout' => 5]);
    $c->check('api', 'a');
    $r = new ReflectionProperty(Client::class, 'curl');
    $h = $r->getValue($c);
    for ($i = 0; $i < 5; $i++) {
        $c->peek('api', 'a');
    }
    assert_same(0, curl_getinfo($h, CURLINFO_NUM_CONNECTS), 'new connections after the first call');
}

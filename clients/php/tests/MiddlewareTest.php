<?php

declare(strict_types=1);

use Nyholm\Psr7\Factory\Psr17Factory;
use Nyholm\Psr7\ServerRequest;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;
use Sluice\Client;
use Sluice\InvalidRequest;
use Sluice\Middleware;

/** The login form of the script: 200 for the right password, 401 otherwise. */
final class LoginForm implements RequestHandlerInterface
{
    public ?ServerRequestInterface $seen = null;

    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        $this->seen = $request;
        $ok = ($request->getParsedBody()['password'] ?? '') === 'right';
        return (new Psr17Factory())->createResponse($ok ? 200 : 401);
    }
}

function form_middleware(string $url, array $options = []): Middleware
{
    return new Middleware(new Client($url, $options + ['timeout' => 5]), new Psr17Factory(), [
        ['rule' => 'form-ip', 'key' => 'ip', 'onlyFailures' => true, 'resetOnSuccess' => true],
        ['rule' => 'form-user', 'key' => 'field:user', 'onlyFailures' => true],
    ]);
}

function login_request(array $step): ServerRequest
{
    return (new ServerRequest('POST', '/login', [], null, '1.1', ['REMOTE_ADDR' => $step['address']]))
        ->withParsedBody(['user' => $step['user'], 'password' => $step['password']]);
}

function test_form_script(): void
{
    // A login form attacked from several addresses, and a user who keeps
    // signing in: the Go client's decisions.
    $s = new Server();
    $m = form_middleware($s->url);
    foreach (script()['form'] as $i => $step) {
        $resp = $m->process(login_request($step), new LoginForm());
        assert_same($step['want'], $resp->getStatusCode(), "step $i " . json_encode($step));
        assert_true($resp->hasHeader('RateLimit') && $resp->hasHeader('RateLimit-Policy'), "step $i: RateLimit fields");
        if ($resp->getStatusCode() === 429) {
            assert_true((int) $resp->getHeaderLine('Retry-After') > 0, 'Retry-After');
            assert_same('application/problem+json', $resp->getHeaderLine('Content-Type'), 'type');
            assert_true(str_contains((string) $resp->getBody(), '"status":429'), 'problem details');
        }
    }
}

function test_header_and_shadow(): void
{
    $s = new Server();
    $c = new Client($s->url, ['timeout' => 5]);
    $m = new Middleware($c, new Psr17Factory(), [
        ['rule' => 'api', 'key' => 'header:X-Api-Key', 'paths' => ['/api/']],
        ['rule' => 'login', 'shadow' => true, 'methods' => ['POST']],
    ]);
    $got = [];
    for ($i = 0; $i < 6; $i++) {
        $got[] = $m->process(new ServerRequest('GET', '/api/items', ['X-Api-Key' => 'key-1']), new LoginForm())->getStatusCode();
    }
    assert_same([401, 401, 401, 401, 401, 429], $got, 'api by header'); // the form answers 401 to a GET
    $form = new LoginForm();
    $limited = [];
    for ($i = 0; $i < 5; $i++) {
        $m->process(new ServerRequest('POST', '/comment', [], null, '1.1', ['REMOTE_ADDR' => '192.0.2.9']), $form);
        $limited[] = $form->seen->getAttribute(Middleware::LIMITED);
    }
    assert_same([false, false, false, true, true], $limited, 'shadow');
}

function test_misconfigured_middleware(): void
{
    $s = new Server();
    $m = new Middleware(new Client($s->url, ['timeout' => 5]), new Psr17Factory(), [['rule' => 'logn']]);
    $e = assert_throws(InvalidRequest::class, fn () => $m->process(new ServerRequest('GET', '/'), new LoginForm()));
    assert_true(str_contains($e->getMessage(), "rule 'logn'"), $e->getMessage());
    assert_throws(InvalidArgumentException::class, fn () => new Middleware(new Client($s->url), new Psr17Factory(), [['rule' => 'x', 'key' => 'cookie:a']]));
}

function test_service_stops(): void
{
    $s = new Server();
    $step = ['address' => '198.51.100.1', 'user' => 'alice', 'password' => 'guess'];
    assert_same(401, form_middleware($s->url)->process(login_request($step), new LoginForm())->getStatusCode(), 'before');
    $s->stop();
    foreach (['open' => 401, 'closed' => 429] as $failure => $want) {
        $m = form_middleware($s->url, ['timeout' => 0.3, 'failure' => $failure]);
        for ($i = 0; $i < 3; $i++) {
            $t = microtime(true);
            $resp = $m->process(login_request($step), new LoginForm());
            assert_true(microtime(true) - $t < 10, 'took ' . (microtime(true) - $t)); // a hang guard: a loaded machine may take seconds
            assert_same($want, $resp->getStatusCode(), "failing $failure");
        }
    }
}

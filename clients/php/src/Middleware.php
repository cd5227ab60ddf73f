<?php

declare(strict_types=1);

namespace Sluice;

use Psr\Http\Message\ResponseFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\MiddlewareInterface;
use Psr\Http\Server\RequestHandlerInterface;

/**
 * PSR-15 middleware that asks the service about each request under its
 * limits, in order, and answers 429 (problem details, Retry-After and the
 * RateLimit fields) for the first that refuses it. Each limit is an array:
 *
 * - rule: the service's rule (required);
 * - key: 'ip' (REMOTE_ADDR; default), 'header:NAME', 'field:NAME' (a
 *   parsed-body field, lower-cased, trimmed and hashed: base64url of its
 *   SHA-256, or HMAC-SHA-256 with 'secret', as httplimit.FormField does),
 *   or a callable(ServerRequestInterface): ?string;
 * - onlyFailures: count only responses that are failures (a 4xx other
 *   than 429, or 'isFailure' => callable(int $status): bool): a place is
 *   reserved before the handler and given back after a success;
 * - resetOnSuccess: forget the key after a success;
 * - shadow: never refuse; the request's attribute 'sluice.limited' is
 *   true when the limit would have;
 * - methods, paths: which requests count (default all; path prefixes).
 */
final class Middleware implements MiddlewareInterface
{
    public const LIMITED = 'sluice.limited';
    private const NO_KEY = '(none)';

    /** @var list<array<string,mixed>> */
    private array $limits;

    /** @param list<array<string,mixed>> $limits */
    public function __construct(
        private readonly Client $client,
        private readonly ResponseFactoryInterface $responses,
        array $limits,
    ) {
        foreach ($limits as $i => $l) {
            if (!is_string($l['rule'] ?? null) || $l['rule'] === '') {
                throw new \InvalidArgumentException("sluice: limit $i needs the name of a rule of the service");
            }
            $key = $l['key'] ?? 'ip';
            if (is_string($key) && $key !== 'ip' && !str_starts_with($key, 'header:') && !str_starts_with($key, 'field:')) {
                throw new \InvalidArgumentException("sluice: rule '{$l['rule']}': key '$key': want 'ip', 'header:NAME', 'field:NAME' or a callable");
            }
        }
        $this->limits = array_values($limits);
    }

    public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface
    {
        $taken = [];
        $limited = false;
        foreach ($this->limits as $l) {
            if (!$this->applies($l, $request)) {
                continue;
            }
            $key = $this->key($l, $request);
            $id = '';
            if ($l['onlyFailures'] ?? false) {
                $id = bin2hex(random_bytes(16));
                $d = $this->client->reserve($l['rule'], $key, $id);
            } else {
                $d = $this->client->check($l['rule'], $key);
            }
            if ($d->shadowed || (!$d->allowed && ($l['shadow'] ?? false))) {
                $limited = true;
                if (!$d->allowed) {
                    continue;
                }
            }
            if (!$d->allowed) {
                $this->settle($taken, false);
                return $this->denied($d);
            }
            $taken[] = [$l, $key, $id, $d];
        }
        $request = $request->withAttribute(self::LIMITED, $limited);
        try {
            $response = $handler->handle($request);
        } catch (\Throwable $e) {
            $this->settle($taken, false);
            throw $e;
        }
        $this->settle($taken, null, $response->getStatusCode());
        $best = null;
        foreach ($taken as [$l, , , $d]) {
            if (!($l['shadow'] ?? false) && $d->headers && ($best === null || $d->remaining < $best->remaining)) {
                $best = $d;
            }
        }
        foreach ($best->headers ?? [] as $name => $value) {
            $response = $response->withHeader($name, $value);
        }
        return $response;
    }

    private function applies(array $l, ServerRequestInterface $r): bool
    {
        if (isset($l['methods']) && !in_array(strtoupper($r->getMethod()), array_map('strtoupper', $l['methods']), true)) {
            return false;
        }
        if (isset($l['paths'])) {
            foreach ($l['paths'] as $p) {
                if (str_starts_with($r->getUri()->getPath(), $p)) {
                    return true;
                }
            }
            return false;
        }
        return true;
    }

    private function key(array $l, ServerRequestInterface $r): string
    {
        $k = $l['key'] ?? 'ip';
        if (is_callable($k)) {
            $v = $k($r);
        } elseif ($k === 'ip') {
            $v = $r->getServerParams()['REMOTE_ADDR'] ?? '';
        } elseif (str_starts_with($k, 'header:')) {
            $v = $r->getHeaderLine(substr($k, 7));
            if (strlen($v) > 256) {
                $v = 'sha256:' . hash('sha256', $v);
            }
        } else {
            $body = $r->getParsedBody();
            $v = is_array($body) ? ($body[substr($k, 6)] ?? null) : null;
            $v = is_string($v) && trim($v) !== '' ? $this->hashField($v, $l['secret'] ?? null) : null;
        }
        return is_string($v) && $v !== '' ? $v : self::NO_KEY;
    }

    private function hashField(string $v, ?string $secret): string
    {
        $v = strtolower(trim($v));
        $digest = $secret !== null ? hash_hmac('sha256', $v, $secret, true) : hash('sha256', $v, true);
        return rtrim(strtr(base64_encode($digest), '+/', '-_'), '=');
    }

    /** @param list<array> $taken */
    private function settle(array $taken, ?bool $failed, int $status = 0): void
    {
        foreach ($taken as [$l, $key, $id, $d]) {
            if ($d->error !== null) {
                continue; // the failure policy decided: nothing is held
            }
            $f = $failed ?? (isset($l['isFailure']) ? (bool) $l['isFailure']($status) : ($status >= 400 && $status < 500 && $status !== 429));
            try {
                if ($id !== '') {
                    $f ? $this->client->commit($l['rule'], $key, $id) : $this->client->refund($l['rule'], $key, $id);
                }
                if (($l['resetOnSuccess'] ?? false) && $failed === null && !$f) {
                    $this->client->reset($l['rule'], $key);
                }
            } catch (Unavailable $e) {
                error_log("sluice: rule '{$l['rule']}': settling a request: " . $e->getMessage());
            }
        }
    }

    private function denied(Decision $d): ResponseInterface
    {
        $wait = max(1, $d->retryAfterSeconds());
        $response = $this->responses->createResponse(429)
            ->withHeader('Content-Type', 'application/problem+json')
            ->withHeader('Retry-After', (string) $wait);
        foreach ($d->headers as $name => $value) {
            $response = $response->withHeader($name, $value);
        }
        $response->getBody()->write(json_encode([
            'type' => 'about:blank', 'title' => 'Too Many Requests', 'status' => 429,
            'detail' => sprintf('rate limit of %s exceeded; retry in %ds', $d->rule !== '' ? $d->rule : 'the service', $wait),
        ]));
        return $response;
    }
}

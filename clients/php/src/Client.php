<?php

declare(strict_types=1);

namespace Sluice;

/**
 * A client of sluice serve's HTTP JSON API over php-curl: one curl handle
 * kept for the client's life, so calls reuse one kept-alive connection,
 * each bounded by the timeout. When the service does not decide, calls
 * that decide return the failure policy's Decision ('open' allows,
 * 'closed' denies for failRetryAfter seconds) with its error set; a
 * request the service refuses throws InvalidRequest naming the rule.
 *
 * Options: timeout (seconds, default 0.5), failure ('open' or 'closed',
 * default 'open'), failRetryAfter (seconds, default 1).
 */
final class Client
{
    private const FIELDS = ['ratelimit' => 'RateLimit', 'ratelimit-policy' => 'RateLimit-Policy'];
    private const MAX_ANSWER = 1 << 20;

    private string $url;
    private float $timeout;
    private string $failure;
    private float $failRetryAfter;
    private ?\CurlHandle $curl = null;

    /** @param array{timeout?:float,failure?:string,failRetryAfter?:float} $options */
    public function __construct(string $url = 'http://127.0.0.1:8080', array $options = [])
    {
        $scheme = parse_url($url, PHP_URL_SCHEME);
        if (!in_array($scheme, ['http', 'https'], true) || !parse_url($url, PHP_URL_HOST)) {
            throw new \InvalidArgumentException("sluice: url '$url': want http://host:port");
        }
        $this->url = rtrim($url, '/');
        $this->timeout = (float) ($options['timeout'] ?? 0.5);
        $this->failure = $options['failure'] ?? 'open';
        $this->failRetryAfter = (float) ($options['failRetryAfter'] ?? 1.0);
        if ($this->timeout <= 0) {
            throw new \InvalidArgumentException('sluice: timeout must be positive seconds');
        }
        if (!in_array($this->failure, ['open', 'closed'], true)) {
            throw new \InvalidArgumentException("sluice: failure '{$this->failure}': want 'open' or 'closed'");
        }
    }

    /** Takes $cost units of $key under $rule if they fit. */
    public function check(string $rule, string $key, int $cost = 1): Decision
    {
        return $this->decide('/v1/check', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost]);
    }

    /** Says whether $cost units would fit, taking nothing. */
    public function peek(string $rule, string $key, int $cost = 1): Decision
    {
        return $this->decide('/v1/check', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost, 'peek' => true]);
    }

    /** Counts $cost whether or not it fits (negative gives back). */
    public function insert(string $rule, string $key, int $cost = 1): Decision
    {
        return $this->decide('/v1/insert', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost]);
    }

    /** Takes $cost now and holds it until commit or refund with the same arguments. */
    public function reserve(string $rule, string $key, string $id, int $cost = 1): Decision
    {
        return $this->decide('/v1/reserve', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost, 'id' => $id]);
    }

    /** Keeps a reservation; throws Unavailable when the service does not answer. */
    public function commit(string $rule, string $key, string $id, int $cost = 1): Decision
    {
        [$a, $h] = $this->call('/v1/commit', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost, 'id' => $id]);
        return $this->decision($a, $h, '/v1/commit');
    }

    /** Gives a reservation back; throws as commit does. */
    public function refund(string $rule, string $key, string $id, int $cost = 1): Decision
    {
        [$a, $h] = $this->call('/v1/refund', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost, 'id' => $id]);
        return $this->decision($a, $h, '/v1/refund');
    }

    /** Reports the outcome of unreserved work once per $id. */
    public function report(string $rule, string $key, string $id, string $outcome = 'failure', int $cost = 1): Decision
    {
        return $this->decide('/v1/report', $rule, ['rule' => $rule, 'key' => $key, 'cost' => $cost, 'id' => $id, 'outcome' => $outcome]);
    }

    /** Forgets $key's state under $rule. */
    public function reset(string $rule, string $key): void
    {
        $this->call('/v1/reset', $rule, ['rule' => $rule, 'key' => $key], 204);
    }

    /** The failure policy's Decision when the service did not decide. */
    public function failed(string $rule, Unavailable $e): Decision
    {
        error_log($e->getMessage() . "; failing {$this->failure}");
        return $this->failure === 'open'
            ? new Decision(true, rule: $rule, error: $e)
            : new Decision(false, rule: $rule, retryAfter: $this->failRetryAfter, error: $e);
    }

    public function close(): void
    {
        $this->curl = null;
    }

    private function decide(string $path, string $rule, array $body): Decision
    {
        try {
            [$a, $h] = $this->call($path, $rule, $body);
            return $this->decision($a, $h, $path);
        } catch (Unavailable $e) {
            return $this->failed($rule, $e);
        }
    }

    /** @return array{0:array<string,mixed>,1:array<string,string>} */
    private function call(string $path, string $rule, array $body, int $want = 200): array
    {
        // Any bytes: invalid UTF-8 becomes U+FFFD, as the Go client's does.
        $payload = json_encode($body, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
        if ($this->curl === null) {
            $this->curl = curl_init();
        }
        $headers = [];
        $size = 0;
        $ms = (int) ceil($this->timeout * 1000);
        curl_setopt_array($this->curl, [
            CURLOPT_URL => $this->url . $path,
            CURLOPT_POST => true,
            CURLOPT_POSTFIELDS => $payload,
            CURLOPT_HTTPHEADER => ['Content-Type: application/json', 'Expect:'],
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_CONNECTTIMEOUT_MS => $ms,
            CURLOPT_TIMEOUT_MS => $ms,
            CURLOPT_NOSIGNAL => true,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_PROTOCOLS => CURLPROTO_HTTP | CURLPROTO_HTTPS,
            CURLOPT_HEADERFUNCTION => function ($ch, string $line) use (&$headers): int {
                $parts = explode(':', $line, 2);
                $name = strtolower(trim($parts[0]));
                if (count($parts) === 2 && isset(self::FIELDS[$name])) {
                    $headers[self::FIELDS[$name]] = trim($parts[1]);
                }
                return strlen($line);
            },
        ]);
        $data = curl_exec($this->curl);
        if ($data === false) {
            $err = curl_error($this->curl);
            $timedOut = curl_errno($this->curl) === CURLE_OPERATION_TIMEDOUT;
            $this->curl = null; // a new connection next time
            throw new Unavailable("sluice: {$this->url}$path: " . ($timedOut ? "no answer within {$this->timeout}s" : $err));
        }
        $status = curl_getinfo($this->curl, CURLINFO_RESPONSE_CODE);
        if (strlen($data) > self::MAX_ANSWER) {
            $this->curl = null;
            throw new Unavailable("sluice: {$this->url}$path: an answer of more than 1 MiB");
        }
        if ($status === $want) {
            if ($want === 204) {
                return [[], $headers];
            }
            $a = json_decode($data, true);
            if (!is_array($a) || array_is_list($a)) {
                throw new Unavailable("sluice: {$this->url}$path answered " . var_export(substr($data, 0, 200), true) . ", not the service's JSON");
            }
            return [$a, $headers];
        }
        $e = json_decode($data, true);
        $detail = is_array($e) ? (string) ($e['detail'] ?? $e['error'] ?? '') : '';
        if ($detail === '') {
            $detail = trim(substr($data, 0, 200));
        }
        $msg = "sluice: rule '$rule': $path: $status: $detail";
        if ($status >= 400 && $status < 500 && $status !== 408 && $status !== 429) {
            throw new InvalidRequest($msg, $status, $rule);
        }
        throw new Unavailable($msg);
    }

    private function decision(array $a, array $headers, string $path): Decision
    {
        if (!is_bool($a['allowed'] ?? null)) {
            throw new Unavailable("sluice: {$this->url}$path answered no decision");
        }
        $num = fn (string $k): float => is_int($a[$k] ?? null) || is_float($a[$k] ?? null) ? (float) $a[$k] : 0.0;
        return new Decision(
            allowed: $a['allowed'],
            rule: (string) ($a['rule'] ?? ''),
            limit: (int) $num('limit'),
            policy: (string) ($a['policy'] ?? ''),
            remaining: (int) $num('remaining'),
            resetAfter: $num('reset_after'),
            retryAfter: $num('retry_after'),
            shadowed: ($a['shadowed'] ?? false) === true,
            guard: (string) ($a['guard'] ?? ''),
            duplicate: ($a['duplicate'] ?? false) === true,
            headers: $headers,
        );
    }
}

<?php

declare(strict_types=1);

namespace Sluice;

/**
 * One rule of the service with the seed's shape: check() throws
 * RateLimitExceeded, carrying the wait, when the key is over its limit
 * (taking nothing); insert() counts, as for a failure; attempt() checks
 * and takes at once, throwing when over.
 *
 *     $logins = new RateLimiter($client, 'login');
 *     $logins->check($ip);           // throws before the password is checked
 *     if (!password_verify(...)) {
 *         $logins->insert($ip);      // a failure counts
 *     }
 */
final class RateLimiter
{
    public function __construct(private readonly Client $client, public readonly string $rule)
    {
    }

    /** Throws RateLimitExceeded when $cost more would not fit; takes nothing. */
    public function check(string $key, int $cost = 1): Decision
    {
        return $this->enforce($this->client->peek($this->rule, $key, $cost));
    }

    /** Counts $cost for $key whether or not it fits; says whether it may still act. */
    public function insert(string $key, int $cost = 1): Decision
    {
        return $this->client->insert($this->rule, $key, $cost);
    }

    /** Takes $cost if it fits, or throws RateLimitExceeded. */
    public function attempt(string $key, int $cost = 1): Decision
    {
        return $this->enforce($this->client->check($this->rule, $key, $cost));
    }

    /** Forgets $key (after a successful sign-in, say). */
    public function reset(string $key): void
    {
        $this->client->reset($this->rule, $key);
    }

    private function enforce(Decision $d): Decision
    {
        if (!$d->allowed) {
            throw new RateLimitExceeded($d);
        }
        return $d;
    }
}

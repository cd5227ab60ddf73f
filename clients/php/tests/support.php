<?php

declare(strict_types=1);

// What the tests share: a real sluice serve on a free loopback port, the
// script every client of clients/ plays, servers that misbehave, asserts.

const TESTDATA = __DIR__ . '/../../testdata';

final class Cleanup
{
    /** @var list<callable> */
    private static array $fns = [];

    public static function add(callable $fn): void
    {
        self::$fns[] = $fn;
    }

    public static function run(): void
    {
        foreach (array_reverse(self::$fns) as $fn) {
            $fn();
        }
        self::$fns = [];
    }
}

/** sluice serve of the shared rules on a free loopback port, stopped when the test ends. */
final class Server
{
    public string $url = '';
    /** @var resource|null */
    private $proc = null;
    private array $pipes = [];

    public function __construct(private string $config = TESTDATA . '/sluice.yaml')
    {
        $this->start('127.0.0.1:0');
        Cleanup::add(fn () => $this->stop());
    }

    public function start(string $listen): void
    {
        $bin = getenv('SLUICE_BIN') ?: trim((string) shell_exec('command -v sluice'));
        if ($bin === '') {
            throw new RuntimeException('no sluice binary: set SLUICE_BIN (go test ./cmd/sluice does)');
        }
        $cmd = [$bin, 'serve', '-config', $this->config, '-listen', $listen, '-watch=false'];
        $this->proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']], $this->pipes);
        stream_set_timeout($this->pipes[1], 30);
        while (($line = fgets($this->pipes[1])) !== false) {
            if (str_starts_with($line, 'sluice: listening on ')) {
                $this->url = trim(substr($line, strlen('sluice: listening on ')));
                return;
            }
        }
        $this->stop(); // never leave a server behind
        throw new RuntimeException('sluice serve did not announce its address');
    }

    public function stop(): void
    {
        if ($this->proc !== null) {
            proc_terminate($this->proc, 15);
            for ($i = 0; $i < 150 && proc_get_status($this->proc)['running']; $i++) {
                usleep(100_000);
            }
            fclose($this->pipes[1]);
            proc_close($this->proc);
            $this->proc = null;
        }
    }
}

/**
 * A server in a process of its own that answers every request with
 * $answer (null: reads and never answers), on a free loopback port.
 */
final class BadServer
{
    public string $url;
    /** @var resource */
    private $proc;

    public function __construct(?string $answer)
    {
        $code = <<<'PHP'
            $s = stream_socket_server('tcp://127.0.0.1:0');
            echo stream_socket_get_name($s, false), "\n";
            $answer = $argv[1] === '-' ? null : base64_decode($argv[1]);
            $conns = [];
            while ($c = @stream_socket_accept($s, 60)) {
                $conns[] = $c;
                fread($c, 65536);
                if ($answer !== null) { fwrite($c, $answer); }
            }
            PHP;
        $this->proc = proc_open([PHP_BINARY, '-r', $code, '--', $answer === null ? '-' : base64_encode($answer)], [1 => ['pipe', 'w']], $pipes);
        $this->url = 'http://' . trim(fgets($pipes[1]));
        Cleanup::add(function () use ($pipes) {
            proc_terminate($this->proc, 9);
            fclose($pipes[1]);
            proc_close($this->proc);
        });
    }
}

function http_answer(string $status, string $body, string $type = 'application/json'): string
{
    return "HTTP/1.1 $status\r\nContent-Type: $type\r\nContent-Length: " . strlen($body) . "\r\n\r\n$body";
}

function script(): array
{
    return json_decode(file_get_contents(TESTDATA . '/script.json'), true, 512, JSON_THROW_ON_ERROR);
}

function assert_same(mixed $want, mixed $got, string $what = ''): void
{
    if ($want !== $got) {
        throw new RuntimeException(sprintf("%s: got %s, want %s", $what, json_encode($got), json_encode($want)));
    }
}

function assert_true(bool $cond, string $what): void
{
    if (!$cond) {
        throw new RuntimeException($what);
    }
}

/** Runs $fn and returns the exception of class $class it throws. */
function assert_throws(string $class, callable $fn, string $what = ''): Throwable
{
    try {
        $fn();
    } catch (Throwable $e) {
        if ($e instanceof $class) {
            return $e;
        }
        throw new RuntimeException("$what: threw " . get_class($e) . ': ' . $e->getMessage() . ", want $class");
    }
    throw new RuntimeException("$what: threw nothing, want $class");
}

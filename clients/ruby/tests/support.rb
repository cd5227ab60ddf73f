# frozen_string_literal: true

require "json"
require "net/http"
require "openssl"
require "tmpdir"
require "socket"
require "timeout"

# What the tests share: a real sluice serve on a free loopback port, the
# script every client of clients/ plays, and servers that misbehave.
module Support
  TESTDATA = File.expand_path("../../testdata", __dir__)

  # sluice serve of the shared rules on a free loopback port.
  class Server
    attr_reader :url

    def initialize(config = File.join(TESTDATA, "sluice.yaml"))
      @config = config
      start("127.0.0.1:0")
    end

    def start(listen)
      bin = ENV["SLUICE_BIN"] || `command -v sluice`.strip
      raise "no sluice binary: set SLUICE_BIN (go test ./cmd/sluice does)" if bin.empty?

      @io = IO.popen([bin, "serve", "-config", @config, "-listen", listen, "-watch=false",
                      { err: File::NULL }])
      Timeout.timeout(30) do
        while (line = @io.gets)
          return @url = line.delete_prefix("sluice: listening on ").strip if line.start_with?("sluice: listening on ")
        end
      end
      raise "sluice serve did not announce its address"
    rescue StandardError, Timeout::Error
      stop # never leave a server behind
      raise
    end

    def stop
      return unless @io

      Process.kill("TERM", @io.pid)
      Timeout.timeout(15) { Process.wait(@io.pid) }
      @io.close
      @io = nil
    rescue Errno::ESRCH, Errno::ECHILD
      @io = nil
    end
  end

  # A server that answers every request with +answer+ (nil: reads and
  # never answers), on a free loopback port.
  class BadServer
    attr_reader :url

    def initialize(answer)
      @server = TCPServer.new("127.0.0.1", 0)
      @url = "http://127.0.0.1:#{@server.addr[1]}"
      @conns = []
      @thread = Thread.new do
        loop do
          c = @server.accept
          @conns << c
          c.readpartial(65_536)
          c.write(answer) if answer
        rescue IOError, SystemCallError
          break
        end
      end
    end

    def close
      @server.close
      @conns.each { |c| c.close rescue nil }
      @thread.join(1)
    end
  end

  # A self-signed certificate of key for the address ip.
  def self.self_signed(key, ip)
    cert = OpenSSL::X509::Certificate.new
    cert.version = 2
    cert.serial = 1
    cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=#{ip}")
    cert.public_key = key
    cert.not_before = Time.now - 60
    cert.not_after = Time.now + 3600
    ext = OpenSSL::X509::ExtensionFactory.new(cert, cert)
    cert.add_extension(ext.create_extension("subjectAltName", "IP:#{ip}"))
    cert.add_extension(ext.create_extension("basicConstraints", "CA:TRUE", true))
    cert.sign(key, OpenSSL::Digest.new("SHA256"))
  end

  def self.http_answer(status, body, type = "application/json")
    "HTTP/1.1 #{status}\r\nContent-Type: #{type}\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}"
  end

  def self.script
    JSON.parse(File.read(File.join(TESTDATA, "script.json")))
  end
end

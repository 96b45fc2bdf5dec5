#include "transport/webtransport/qpack.h"

#include <nghttp3/nghttp3.h>

#include <string_view>

namespace moqd::transport::webtransport {
namespace {

// RFC 9114 §4.2.2: a field's size counts its name, its value and 32 bytes of overhead.
constexpr size_t kFieldOverhead = 32;

std::string_view view(const nghttp3_rcbuf* buf) {
  nghttp3_vec v = nghttp3_rcbuf_get_buf(buf);
  return std::string_view(reinterpret_cast<const char*>(v.base), v.len);
}

// Owns the two rcbufs of one decoded field.
class DecodedField {
 public:
  explicit DecodedField(nghttp3_qpack_nv& nv) : nv_(nv) {}
  ~DecodedField() {
    nghttp3_rcbuf_decref(nv_.name);
    nghttp3_rcbuf_decref(nv_.value);
  }
  DecodedField(const DecodedField&) = delete;
  DecodedField& operator=(const DecodedField&) = delete;

  std::string_view name() const { return view(nv_.name); }
  std::string_view value() const { return view(nv_.value); }

 private:
  nghttp3_qpack_nv& nv_;
};

H3Error decode_error(nghttp3_ssize rv) {
  if (rv == NGHTTP3_ERR_NOMEM) {
    return H3Error{H3Code::kInternalError, "qpack out of memory"};
  }
  return H3Error{H3Code::kQpackDecompressionFailed, "qpack decompression failed"};
}

// An nghttp3 buffer that frees itself.
struct OwnedBuf {
  OwnedBuf() { nghttp3_buf_init(&buf); }
  ~OwnedBuf() { nghttp3_buf_free(&buf, nghttp3_mem_default()); }
  OwnedBuf(const OwnedBuf&) = delete;
  OwnedBuf& operator=(const OwnedBuf&) = delete;

  std::span<const uint8_t> span() const {
    return std::span<const uint8_t>(buf.pos, nghttp3_buf_len(&buf));
  }

  nghttp3_buf buf;
};

bool has_upper_case(std::string_view s) {
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') {
      return true;
    }
  }
  return false;
}

}  // namespace

struct QpackDecoder::Impl {
  ~Impl() {
    if (sctx != nullptr) {
      nghttp3_qpack_stream_context_del(sctx);
    }
    if (decoder != nullptr) {
      nghttp3_qpack_decoder_del(decoder);
    }
  }

  nghttp3_qpack_decoder* decoder = nullptr;
  nghttp3_qpack_stream_context* sctx = nullptr;
};

QpackDecoder::QpackDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QpackDecoder::~QpackDecoder() = default;

H3Result<std::unique_ptr<QpackDecoder>> QpackDecoder::create() {
  auto impl = std::make_unique<Impl>();
  const nghttp3_mem* mem = nghttp3_mem_default();
  // Table capacity 0 and no blocked streams: what our SETTINGS advertise.
  if (nghttp3_qpack_decoder_new(&impl->decoder, 0, 0, mem) != 0 ||
      nghttp3_qpack_stream_context_new(&impl->sctx, 0, mem) != 0) {
    return h3_fail(H3Code::kInternalError, "qpack decoder allocation failed");
  }
  return std::unique_ptr<QpackDecoder>(new QpackDecoder(std::move(impl)));
}

H3Result<HeaderList> QpackDecoder::decode(std::span<const uint8_t> field_section,
                                          size_t max_field_section_size) {
  nghttp3_qpack_stream_context_reset(impl_->sctx);
  HeaderList fields;
  size_t size = 0;
  const uint8_t* pos = field_section.data();
  const uint8_t* end = pos + field_section.size();
  while (true) {
    nghttp3_qpack_nv nv;
    uint8_t flags = NGHTTP3_QPACK_DECODE_FLAG_NONE;
    nghttp3_ssize n = nghttp3_qpack_decoder_read_request(
        impl_->decoder, impl_->sctx, &nv, &flags, pos, static_cast<size_t>(end - pos), 1);
    if (n < 0) {
      return tl::unexpected<H3Error>(decode_error(n));
    }
    pos += n;
    if ((flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) != 0) {
      DecodedField field(nv);
      size += field.name().size() + field.value().size() + kFieldOverhead;
      if (size > max_field_section_size) {
        return h3_fail(H3Code::kExcessiveLoad, "field section too large");
      }
      fields.push_back(HeaderField{std::string(field.name()), std::string(field.value())});
    }
    if ((flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL) != 0) {
      break;
    }
    if ((flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED) != 0) {
      return h3_fail(H3Code::kQpackDecompressionFailed, "field section blocked");
    }
    if (n == 0 && (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) == 0) {
      return h3_fail(H3Code::kQpackDecompressionFailed, "qpack decoder made no progress");
    }
  }
  if (pos != end) {
    return h3_fail(H3Code::kQpackDecompressionFailed, "bytes after field section");
  }
  return fields;
}

H3Result<void> QpackDecoder::read_encoder_stream(std::span<const uint8_t> data) {
  nghttp3_ssize n = nghttp3_qpack_decoder_read_encoder(impl_->decoder, data.data(), data.size());
  if (n == NGHTTP3_ERR_NOMEM) {
    return h3_fail(H3Code::kInternalError, "qpack out of memory");
  }
  if (n < 0 || static_cast<size_t>(n) != data.size()) {
    return h3_fail(H3Code::kQpackEncoderStreamError, "qpack encoder stream error");
  }
  return {};
}

H3Result<std::vector<uint8_t>> encode_field_section(const HeaderList& headers) {
  std::vector<nghttp3_nv> nva;
  nva.reserve(headers.size());
  for (const HeaderField& f : headers) {
    if (has_upper_case(f.name)) {
      return h3_fail(H3Code::kInternalError, "upper-case field name");
    }
    nva.push_back(nghttp3_nv{
        reinterpret_cast<const uint8_t*>(f.name.data()),
        reinterpret_cast<const uint8_t*>(f.value.data()), f.name.size(),
        f.value.size(), NGHTTP3_NV_FLAG_NONE});
  }
  nghttp3_qpack_encoder* encoder = nullptr;
  if (nghttp3_qpack_encoder_new(&encoder, 0, nghttp3_mem_default()) != 0) {
    return h3_fail(H3Code::kInternalError, "qpack encoder allocation failed");
  }
  OwnedBuf prefix, request, encoder_stream;
  int rv = nghttp3_qpack_encoder_encode(encoder, &prefix.buf, &request.buf, &encoder_stream.buf, 0,
                                        nva.data(), nva.size());
  nghttp3_qpack_encoder_del(encoder);
  // Capacity 0 never writes the encoder stream; if it did, the peer could not decode us.
  if (rv != 0 || !encoder_stream.span().empty()) {
    return h3_fail(H3Code::kInternalError, "qpack encoding failed");
  }
  std::vector<uint8_t> out(prefix.span().begin(), prefix.span().end());
  out.insert(out.end(), request.span().begin(), request.span().end());
  return out;
}

}  // namespace moqd::transport::webtransport

// 8250/16550A UART register offsets and bits, named as in the National Semiconductor datasheet.
#pragma once

#include <cstdint>

namespace tern::uart {

// Register offsets from the base port. With LCR.DLAB set, offsets 0 and 1 are DLL/DLM.
inline constexpr uint64_t kRbrThr = 0;  ///< RBR (read) / THR (write); DLL when DLAB.
inline constexpr uint64_t kIer = 1;     ///< Interrupt Enable; DLM when DLAB.
inline constexpr uint64_t kIirFcr = 2;  ///< IIR (read) / FCR (write).
inline constexpr uint64_t kLcr = 3;
inline constexpr uint64_t kMcr = 4;
inline constexpr uint64_t kLsr = 5;
inline constexpr uint64_t kMsr = 6;
inline constexpr uint64_t kScr = 7;
inline constexpr uint64_t kRegisterCount = 8;

// IER
inline constexpr uint8_t kIerRdi = 0x01;   ///< Received data available.
inline constexpr uint8_t kIerThri = 0x02;  ///< Transmitter holding register empty.
inline constexpr uint8_t kIerRlsi = 0x04;  ///< Receiver line status.
inline constexpr uint8_t kIerMsi = 0x08;   ///< Modem status.
inline constexpr uint8_t kIerMask = 0x0F;  ///< Bits 7:4 read as 0 on a 16550A.

// IIR: interrupt identification (bits 3:0) and FIFO state (bits 7:6).
inline constexpr uint8_t kIirNoInt = 0x01;
inline constexpr uint8_t kIirMsi = 0x00;
inline constexpr uint8_t kIirThri = 0x02;
inline constexpr uint8_t kIirRdi = 0x04;
inline constexpr uint8_t kIirRlsi = 0x06;
inline constexpr uint8_t kIirIdMask = 0x0F;
inline constexpr uint8_t kIirFifoEnabled = 0xC0;  ///< Both bits set: a 16550A with FIFOs on.

// FCR
inline constexpr uint8_t kFcrEnableFifo = 0x01;
inline constexpr uint8_t kFcrClearRcvr = 0x02;
inline constexpr uint8_t kFcrClearXmit = 0x04;
inline constexpr uint8_t kFcrStoredMask = 0xC9;  ///< Enable, DMA mode, RCVR trigger bits.

// LCR
inline constexpr uint8_t kLcrDlab = 0x80;

// MCR
inline constexpr uint8_t kMcrDtr = 0x01;
inline constexpr uint8_t kMcrRts = 0x02;
inline constexpr uint8_t kMcrOut1 = 0x04;
inline constexpr uint8_t kMcrOut2 = 0x08;
inline constexpr uint8_t kMcrLoop = 0x10;
inline constexpr uint8_t kMcrMask = 0x1F;  ///< Bits 7:5 read as 0 on a 16550A.

// LSR
inline constexpr uint8_t kLsrDr = 0x01;    ///< Data ready.
inline constexpr uint8_t kLsrOe = 0x02;    ///< Overrun error.
inline constexpr uint8_t kLsrPe = 0x04;    ///< Parity error.
inline constexpr uint8_t kLsrFe = 0x08;    ///< Framing error.
inline constexpr uint8_t kLsrBi = 0x10;    ///< Break interrupt.
inline constexpr uint8_t kLsrThre = 0x20;  ///< THR empty.
inline constexpr uint8_t kLsrTemt = 0x40;  ///< Transmitter empty.
inline constexpr uint8_t kLsrErrorBits = kLsrOe | kLsrPe | kLsrFe | kLsrBi;

// MSR: delta bits 3:0 (cleared on read), line states 7:4.
inline constexpr uint8_t kMsrDcts = 0x01;
inline constexpr uint8_t kMsrDdsr = 0x02;
inline constexpr uint8_t kMsrTeri = 0x04;
inline constexpr uint8_t kMsrDdcd = 0x08;
inline constexpr uint8_t kMsrCts = 0x10;
inline constexpr uint8_t kMsrDsr = 0x20;
inline constexpr uint8_t kMsrRi = 0x40;
inline constexpr uint8_t kMsrDcd = 0x80;
inline constexpr uint8_t kMsrDeltaMask = 0x0F;

}  // namespace tern::uart

! SPDX-License-Identifier: BSD-3-Clause
! The rest of the calls Veneer takes over, from `include 'mpif.h'`: Init_thread, Ssend,
! Rsend, Issend, Bsend, Ibsend, Irsend, Send_init/Recv_init/Start/Startall, Sendrecv_replace, Waitsome, Testsome, Testany, Testall,
! Request_get_status, Request_free, Cancel, Bcast, Reduce, Allgather,
! Alltoall, Alltoallv/w, Neighbor_alltoallv/w, Reduce_scatter(_block), each
! result checked against a hand-computed reference.
program calls_test
  implicit none
  include 'mpif.h'
  integer, parameter :: n = 2048, maxr = 8
  integer :: provided, rank, nranks, ierr, left, right, vec, pair, i, j, k, outcount, index, ring
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4), reqs(4), indices(4)
  integer :: counts(maxr), displs(maxr), rcounts(maxr), rdispls(maxr), types(maxr), rtypes(maxr)
  integer :: ibuf(4 * maxr), iout(2 * maxr), ired(maxr), nsrc(2)
  integer(kind=MPI_ADDRESS_KIND) :: wdispls(maxr), wrdispls(maxr), extent
  double precision :: sbuf(2 * n), rbuf(2 * n), bbuf(2 * n)
  logical :: flag, cancelled
  logical :: seen(4)

  rank = -1
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call check(ierr == MPI_SUCCESS .and. provided >= MPI_THREAD_SINGLE, 'init_thread')
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  if (nranks > maxr) call check(.false., 'at most 8 ranks')
  right = mod(rank + 1, nranks)
  left = mod(rank - 1 + nranks, nranks)
  call MPI_Type_vector(n, 1, 2, MPI_DOUBLE_PRECISION, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  do i = 1, 2 * n
    sbuf(i) = value(rank, i)
  end do

  ! Ssend / Recv (even ranks send first), Issend completed by Waitsome.
  rbuf = -1d0
  if (mod(rank, 2) == 0) then
    call MPI_Ssend(sbuf, 1, vec, right, 1, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rbuf, 1, vec, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(rbuf, 1, vec, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Ssend(sbuf, 1, vec, right, 1, MPI_COMM_WORLD, ierr)
  end if
  call check_vector(rbuf, left, 'ssend/recv')

  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, right, 2, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Issend(sbuf, 1, vec, left, 2, MPI_COMM_WORLD, reqs(2), ierr)
  seen = .false.
  do k = 1, 2
    if (all(seen(1:2))) exit
    call MPI_Waitsome(2, reqs, outcount, indices, statuses, ierr)
    do j = 1, outcount
      call check(indices(j) == 1 .or. indices(j) == 2, 'waitsome index')
      seen(indices(j)) = .true.
      if (indices(j) == 1) call check(statuses(MPI_SOURCE, j) == right .and. statuses(MPI_TAG, j) == 2, &
                                      'waitsome status')
    end do
  end do
  if (.not. all(seen(1:2))) call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(all(reqs(1:2) == MPI_REQUEST_NULL), 'waitsome requests freed')
  call check_vector(rbuf, right, 'issend + waitsome')

  ! Persistent: Recv_init / Send_init, two rounds of Startall + Waitall, then Start + Wait, then Request_free.
  call MPI_Recv_init(rbuf, 1, vec, left, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Send_init(sbuf, 1, vec, right, 9, MPI_COMM_WORLD, reqs(2), ierr)
  do k = 1, 3
    rbuf = -1d0
    if (k < 3) call MPI_Startall(2, reqs, ierr)
    if (k == 3) call MPI_Start(reqs(1), ierr)
    if (k == 3) call MPI_Start(reqs(2), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
    call check(all(reqs(1:2) /= MPI_REQUEST_NULL), 'persistent requests stay')
    call check_vector(rbuf, left, 'send_init/recv_init + start(all)')
  end do
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  call check(all(reqs(1:2) == MPI_REQUEST_NULL), 'persistent requests freed')

  ! Bsend, Ibsend (an attached buffer) and Irsend, each receive posted before a barrier.
  call MPI_Buffer_attach(bbuf, 8 * size(bbuf), ierr)
  do k = 1, 3
    rbuf = -1d0
    call MPI_Irecv(rbuf, 1, vec, left, 9 + k, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    reqs(2) = MPI_REQUEST_NULL
    if (k == 1) call MPI_Bsend(sbuf, 1, vec, right, 9 + k, MPI_COMM_WORLD, ierr)
    if (k == 2) call MPI_Ibsend(sbuf, 1, vec, right, 9 + k, MPI_COMM_WORLD, reqs(2), ierr)
    if (k == 3) call MPI_Irsend(sbuf, 1, vec, right, 9 + k, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
    call check_vector(rbuf, left, 'bsend / ibsend / irsend')
  end do
  call MPI_Buffer_detach(bbuf, i, ierr)

  ! Testsome, Testany and Testall loops.
  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 3, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sbuf, 1, vec, right, 3, MPI_COMM_WORLD, reqs(2), ierr)
  seen = .false.
  do while (.not. all(seen(1:2)))
    call MPI_Testsome(2, reqs, outcount, indices, MPI_STATUSES_IGNORE, ierr)
    if (outcount /= MPI_UNDEFINED) then
      do j = 1, outcount
        seen(indices(j)) = .true.
      end do
    end if
  end do
  call check_vector(rbuf, left, 'testsome')

  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, right, 4, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sbuf, 1, vec, left, 4, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testany(1, reqs(1:1), index, flag, status, ierr)
  end do
  call check(index == 1 .and. status(MPI_SOURCE) == right .and. status(MPI_TAG) == 4, 'testany index/status')
  call check_vector(rbuf, right, 'testany')
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(1, reqs(2:2), flag, statuses, ierr)
  end do

  ! Request_get_status says complete: the data is there before the Wait.
  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sbuf, 1, vec, right, 5, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Request_get_status(reqs(1), flag, status, ierr)
  end do
  call check(status(MPI_SOURCE) == left .and. status(MPI_TAG) == 5, 'request_get_status status')
  call check_vector(rbuf, left, 'request_get_status')
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call check_vector(rbuf, left, 'wait after request_get_status')

  ! Rsend into a posted receive; Request_free on a send; Cancel of a receive.
  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 6, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Rsend(sbuf, 1, vec, right, 6, MPI_COMM_WORLD, ierr)
  call MPI_Wait(reqs(1), status, ierr)
  call check_vector(rbuf, left, 'rsend')

  rbuf = -1d0
  call MPI_Isend(sbuf, 1, vec, right, 7, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Request_free(reqs(2), ierr)
  call check(reqs(2) == MPI_REQUEST_NULL, 'request_free handle')
  call MPI_Recv(rbuf, 1, vec, left, 7, MPI_COMM_WORLD, status, ierr)
  call check_vector(rbuf, left, 'request_free send')

  call MPI_Irecv(rbuf, 1, vec, left, 99, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Cancel(reqs(1), ierr)
  call MPI_Wait(reqs(1), status, ierr)
  call MPI_Test_cancelled(status, cancelled, ierr)
  call check(cancelled .and. reqs(1) == MPI_REQUEST_NULL, 'cancel')

  ! Sendrecv_replace: odd elements replaced by the left neighbour's.
  rbuf = sbuf
  call MPI_Sendrecv_replace(rbuf, 1, vec, right, 8, left, 8, MPI_COMM_WORLD, status, ierr)
  call check(status(MPI_SOURCE) == left .and. status(MPI_TAG) == 8, 'sendrecv_replace status')
  do i = 1, n
    call check(rbuf(2 * i - 1) == value(left, 2 * i - 1) .and. rbuf(2 * i) == value(rank, 2 * i), &
               'sendrecv_replace')
  end do

  ! Bcast of the vector from the last rank; Reduce to rank 1 (or 0).
  rbuf = -1d0
  if (rank == nranks - 1) rbuf = sbuf
  call MPI_Bcast(rbuf, 1, vec, nranks - 1, MPI_COMM_WORLD, ierr)
  do i = 1, n
    call check(rbuf(2 * i - 1) == value(nranks - 1, 2 * i - 1), 'bcast')
    if (rank /= nranks - 1) call check(rbuf(2 * i) == -1d0, 'bcast gaps')
  end do
  ired(1:3) = [rank, 1, 10 * rank]
  if (rank == min(1, nranks - 1)) then
    call MPI_Reduce(MPI_IN_PLACE, ired, 3, MPI_INTEGER, MPI_SUM, min(1, nranks - 1), MPI_COMM_WORLD, ierr)
    call check(all(ired(1:3) == [tri(nranks), nranks, 10 * tri(nranks)]), 'reduce')
  else
    call MPI_Reduce(ired, iout, 3, MPI_INTEGER, MPI_SUM, min(1, nranks - 1), MPI_COMM_WORLD, ierr)
  end if

  ! Allgather and Alltoall of integers.
  iout = -1
  call MPI_Allgather([rank, -rank], 2, MPI_INTEGER, iout, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do j = 0, nranks - 1
    call check(iout(2 * j + 1) == j .and. iout(2 * j + 2) == -j, 'allgather')
  end do
  do j = 0, nranks - 1
    ibuf(j + 1) = 100 * rank + j
  end do
  call MPI_Alltoall(ibuf, 1, MPI_INTEGER, iout, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do j = 0, nranks - 1
    call check(iout(j + 1) == 100 * j + rank, 'alltoall')
  end do

  ! Alltoallv / Alltoallw: every other integer of a 4-integer slot per peer.
  call MPI_Type_vector(2, 1, 2, MPI_INTEGER, j, ierr)
  extent = 16
  call MPI_Type_create_resized(j, 0_MPI_ADDRESS_KIND, extent, pair, ierr)  ! one slot of 4 integers
  call MPI_Type_free(j, ierr)
  call MPI_Type_commit(pair, ierr)
  do j = 0, nranks - 1
    ibuf(4 * j + 1:4 * j + 4) = [1000 * rank + 10 * j, -7, 1000 * rank + 10 * j + 1, -7]
    counts(j + 1) = 1
    displs(j + 1) = j
    rcounts(j + 1) = 2
    rdispls(j + 1) = 2 * j
    types(j + 1) = pair
    rtypes(j + 1) = MPI_INTEGER
    wdispls(j + 1) = 16 * j
    wrdispls(j + 1) = 8 * j
  end do
  iout = -1
  call MPI_Alltoallv(ibuf, counts, displs, pair, iout, rcounts, rdispls, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check_exchange('alltoallv')
  ! Alltoallw counts and displacements are bytes; its displacements are INTEGERs here.
  do j = 1, nranks
    displs(j) = int(wdispls(j))
    rdispls(j) = int(wrdispls(j))
  end do
  iout = -1
  call MPI_Alltoallw(ibuf, counts, displs, types, iout, rcounts, rdispls, rtypes, MPI_COMM_WORLD, ierr)
  call check_exchange('alltoallw')

  ! Neighbourhood forms on a periodic ring: neighbours are left, then right.
  ! (At least 3 ranks: with 2 the left and right neighbour are one rank, and
  ! MPICH 4.0 matches its two messages in the other order.)
  if (nranks >= 3) then
    call MPI_Cart_create(MPI_COMM_WORLD, 1, [nranks], [.true.], .false., ring, ierr)
    do j = 0, 1
      ibuf(4 * j + 1:4 * j + 4) = [1000 * rank + 10 * j, -7, 1000 * rank + 10 * j + 1, -7]
      displs(j + 1) = j
      rdispls(j + 1) = 2 * j
      wdispls(j + 1) = 16 * j
      wrdispls(j + 1) = 8 * j
    end do
    nsrc = [left, right]
    iout = -1
    call MPI_Neighbor_alltoallv(ibuf, counts, displs, pair, iout, rcounts, rdispls, MPI_INTEGER, ring, ierr)
    call check_neighbours('neighbor_alltoallv')
    iout = -1
    call MPI_Neighbor_alltoallw(ibuf, counts, wdispls, types, iout, rcounts, wrdispls, rtypes, ring, ierr)
    call check_neighbours('neighbor_alltoallw')
    call MPI_Comm_free(ring, ierr)
  end if

  ! Reduce_scatter_block and Reduce_scatter.
  do j = 0, nranks - 1
    ibuf(j + 1) = rank + 100 * j
  end do
  call MPI_Reduce_scatter_block(ibuf, ired, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(ired(1) == tri(nranks) + 100 * rank * nranks, 'reduce_scatter_block')
  rcounts(1:nranks) = 1
  call MPI_Reduce_scatter(ibuf, ired, rcounts, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(ired(1) == nranks - 1 + 100 * rank, 'reduce_scatter')

  call MPI_Type_free(vec, ierr)
  call MPI_Type_free(pair, ierr)
  if (rank == 0) print '(a,i0)', 'fortran calls_test: ok, ranks ', nranks
  call MPI_Finalize(ierr)

contains

  double precision function value(r, i)
    integer, intent(in) :: r, i
    value = dble(r) * 1d6 + dble(i)
  end function

  integer function tri(m)  ! 0 + 1 + ... + (m-1)
    integer, intent(in) :: m
    tri = m * (m - 1) / 2
  end function

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,2a)', 'fortran calls_test: rank ', rank, ' FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine

  subroutine check_vector(buf, from, what)
    double precision, intent(in) :: buf(2 * n)
    integer, intent(in) :: from
    character(*), intent(in) :: what
    integer :: m
    do m = 1, n
      call check(buf(2 * m - 1) == value(from, 2 * m - 1) .and. buf(2 * m) == -1d0, what)
    end do
  end subroutine

  ! From peer p: the two integers p put in its slot for this rank.
  subroutine check_exchange(what)
    character(*), intent(in) :: what
    integer :: p
    do p = 0, nranks - 1
      call check(iout(2 * p + 1) == 1000 * p + 10 * rank .and. iout(2 * p + 2) == 1000 * p + 10 * rank + 1, what)
    end do
  end subroutine

  ! Slot 0 comes from the left neighbour (its slot 1, sent right), slot 1 from the right (its slot 0).
  subroutine check_neighbours(what)
    character(*), intent(in) :: what
    call check(iout(1) == 1000 * nsrc(1) + 10 .and. iout(2) == 1000 * nsrc(1) + 11, what)
    call check(iout(3) == 1000 * nsrc(2) .and. iout(4) == 1000 * nsrc(2) + 1, what)
  end subroutine

end program
